package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// run on a file that does not exist creates it (a runner may start before
// anything is enqueued) and warns, so a mistyped --db does not look like a
// runner with nothing to do; on an existing file it does not warn.
func TestRunWarnsWhenItCreatesTheDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fresh := filepath.Join(e.dir, "typo.db")
	r := e.okProc("run", "--db", fresh, "--until-idle", "--no-socket")
	if !strings.Contains(r.stderr, "created a new, empty database") {
		t.Errorf("run on a missing file: no warning\n%s", r)
	}
	r = e.okProc("run", "--db", fresh, "--until-idle", "--no-socket")
	if strings.Contains(r.stderr, "created a new") {
		t.Errorf("run on an existing file warned\n%s", r)
	}
}

// A socket that cannot be bound names --no-socket; on a file system that
// cannot hold one at all (bind: function not implemented) it says so.
func TestSocketListenError(t *testing.T) {
	t.Parallel()
	bindErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "listen", Net: "unix", Addr: &net.UnixAddr{Name: "jobs.db.sock", Net: "unix"}, Err: os.NewSyscallError("bind", errno)}
	}
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{bindErr(syscall.ENOSYS), []string{"listen unix jobs.db.sock: bind: ", "this file system cannot hold a unix socket", "start with --no-socket"}},
		{bindErr(syscall.EACCES), []string{"listen unix jobs.db.sock: bind: ", "start with --no-socket"}},
	} {
		got := socketListenError(tc.err).Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("socketListenError(%v) = %q, want it to hold %q", tc.err, got, w)
			}
		}
		if tc.err.(*net.OpError).Err.(*os.SyscallError).Err == syscall.EACCES && strings.Contains(got, "file system") {
			t.Errorf("socketListenError(%v) = %q blames the file system", tc.err, got)
		}
	}
}
