package main

import (
	"path/filepath"
	"strings"
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
