//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A database file its user cannot write: enqueue fails with an error
// naming the file (no panic) and writes nothing; check reads it. Root
// ignores file modes, so as root the commands run as uid 65534 on a file
// that uid owns with mode 0400.
func TestCLIReadOnlyFile(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "idr-ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	db := filepath.Join(dir, "ro.db")
	fillDB(t, db)
	bin := binPath
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// The test binary's directory is private to root: run it from
		// here. A hard link, not a copy: while this process held a copy
		// open for writing, a child another parallel test forks would
		// inherit the descriptor, and exec of the copy would fail with
		// "text file busy" until that child execs.
		bin = filepath.Join(dir, "idemrun")
		if err := os.Link(binPath, bin); err != nil {
			// Another filesystem: copy it, and accept the small risk.
			b, err := os.ReadFile(binPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{dir, db} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Skipf("cannot hand the file to uid 65534 (%v); the read-only path is covered by internal/e2e TestReadOnlyFile", err)
			}
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	if err := os.Chmod(db, 0o400); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return exitCode(t, cmd)
	}
	r := run("enqueue", "--db", db, "--url", "http://127.0.0.1:9/pay", "--key", "ro-new")
	noCrash(t, r)
	if r.code == 0 || !strings.Contains(r.stderr, "ro.db") || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("enqueue to a read-only file: got\n%s\nwant a failure naming ro.db and the permission", r)
	}
	r = run("check", db)
	noCrash(t, r)
	if r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Errorf("check of a read-only file: got\n%s\nwant exit 0 and ok", r)
	}
	for _, args := range [][]string{{"list", "--db", db}, {"show", "damaged-01", "--db", db}, {"cancel", "damaged-01", "--db", db}} {
		r := run(args...)
		noCrash(t, r)
		if r.code != 0 && !strings.Contains(r.stderr, "ro.db") {
			t.Errorf("%v on a read-only file: got\n%s\nwant success or an error naming ro.db", args, r)
		}
	}
	after, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the read-only file changed")
	}
}
