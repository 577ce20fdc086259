package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A --memprofile that cannot be written is a bad flag like a bad
// --cpuprofile: refused before anything runs (exit 2, naming the flag), not
// found out after the whole bench ran, its figures thrown away.
func TestBenchBadMemprofileRefusedFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("bench", "--jobs", "20", "--workers", "2", "--producers", "2", "--dir", e.dir,
		"--memprofile", filepath.Join(e.dir, "no-such-dir", "mem.prof"))
	if r.code != 2 || !strings.Contains(r.stderr, "memprofile") {
		t.Errorf("got\n%s\nwant exit 2 naming --memprofile", r)
	}
	if strings.Contains(r.stderr, "raw bbolt") {
		t.Errorf("the bench ran (%s) before the bad --memprofile was refused", r.took)
	}
}

// A --cpuprofile that cannot be created is refused as a bad flag too: exit
// 2, naming it.
func TestBenchBadCPUProfileNamesFlag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("bench", "--jobs", "20", "--cpuprofile", filepath.Join(e.dir, "no-such-dir", "cpu.prof"))
	if r.code != 2 || !strings.Contains(r.stderr, "cpuprofile") {
		t.Errorf("got\n%s\nwant exit 2 naming --cpuprofile", r)
	}
}

// --profile-phase without --cpuprofile is refused: it would profile
// nothing, silently.
func TestBenchProfilePhaseNeedsCPUProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("bench", "--jobs", "20", "--profile-phase", "work")
	if r.code != 2 || !strings.Contains(r.stderr, "--cpuprofile") {
		t.Errorf("got\n%s\nwant exit 2 asking for --cpuprofile", r)
	}
}

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
