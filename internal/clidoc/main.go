package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// outPath is where the reference goes, relative to the module's root.
const outPath = "docs/cli.md"

func main() {
	if err := generate("."); err != nil {
		fmt.Fprintln(os.Stderr, "clidoc:", err)
		os.Exit(1)
	}
}

// generate builds idemrun from the module at root and writes its
// reference to root/docs/cli.md.
func generate(root string) error {
	doc, err := renderModule(root)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, outPath), doc, 0o644)
}

// renderModule builds the idemrun binary of the module at root into a
// temporary directory and renders its reference.
func renderModule(root string) ([]byte, error) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("run me from the module's root (no go.mod in %s)", root)
	}
	tmp, err := os.MkdirTemp("", "clidoc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "idemrun")
	build := exec.Command("go", "build", "-o", bin, "./cmd/idemrun")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/idemrun: %v\n%s", err, out)
	}
	return render(binaryRunner(bin, tmp), root)
}

// binaryRunner runs the binary in dir, with an environment that names no
// database, and returns what it printed on both streams.
func binaryRunner(bin, dir string) runFunc {
	return func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("idemrun %v: %v\n%s", args, err, out)
		}
		return string(out), nil
	}
}
