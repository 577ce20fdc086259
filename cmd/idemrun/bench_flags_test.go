package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A --memprofile that cannot be written is a bad flag like a bad
// --cpuprofile: refused before anything runs (exit 2, naming the flag), not
// found out after the whole bench ran, its figures thrown away.
// A --memprofile file that cannot be created is refused before the bench
// runs (exit 2, naming the flag), not after it has run for minutes.
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
// A --cpuprofile file that cannot be created is refused as bad input,
// naming the flag.
func TestBenchBadCPUProfileNamesFlag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("bench", "--jobs", "20", "--cpuprofile", filepath.Join(e.dir, "no-such-dir", "cpu.prof"))
	if r.code != 2 || !strings.Contains(r.stderr, "cpuprofile") {
		t.Errorf("got\n%s\nwant exit 2 naming --cpuprofile", r)
	}
}
