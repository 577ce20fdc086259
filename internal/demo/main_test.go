package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// binPath is the idemrun binary TestMain builds once for the tests'
// runner processes; it is set before any test runs and never changed.
var binPath string

// TestMain builds the binary and provides the shared Postgres server of
// pgtest.Schema.
func TestMain(m *testing.M) { os.Exit(buildAndRun(m)) }

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "idemrun-demo-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo tests: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "idemrun")
	cmd := exec.Command("go", "build", "-o", binPath, "github.com/idemrun/idemrun/cmd/idemrun")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "demo tests: building idemrun: %v\n%s", err, out)
		return 1
	}
	return pgtest.Main(m)
}
