package main

import (
	"net"
	"net/http"
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
// cannot hold one at all (bind answering ENOSYS) it says so.
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

// run logs at its default level one line per job it ends, with the key,
// and what an --until-idle run waits for when the jobs left are due
// later; never a header value. On a bbolt file and on Postgres.
func TestRunLogsJobEnds(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		t.Parallel()
		runLogsJobEnds(t, newEnv(t))
	})
	t.Run("postgres", func(t *testing.T) {
		e := pgEnv(t)
		e.ok("migrate")
		runLogsJobEnds(t, e)
	})
}

func runLogsJobEnds(t *testing.T, e *env) {
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	e.ok("enqueue", "--url", tg.url("/ok"), "--key", "log-ok", "-H", "Authorization: Bearer sk_live_LOGSECRET")
	e.ok("enqueue", "--url", tg.url("/bad"), "--key", "log-bad")
	e.ok("enqueue", "--url", tg.url("/ok"), "--key", "log-later", "--run-at", "3s")
	r := e.okProc("run", "--until-idle", "--no-socket")
	for _, want := range []string{
		`level=INFO msg="job ended"`, "key=log-ok state=succeeded attempts=1 since_enqueue=",
		`level=WARN msg="job ended"`, `key=log-bad state=failed attempts=1 since_enqueue=`, `reason="permanent: `,
		`msg="waiting for jobs due later before stopping when idle" jobs=1`,
		"key=log-later state=succeeded",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run's log has no %q:\n%s", want, r.stderr)
		}
	}
	mustNotContain(t, "run's log", r.stderr, "sk_live_LOGSECRET")
}
