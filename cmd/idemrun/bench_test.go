package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// Bad bench flags are usage errors: exit 2 naming the flag, nothing run and
// no profile file left behind.
func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prof := filepath.Join(e.dir, "cpu.prof")
	// A file the bench must not touch: it deletes its --db when it ends.
	precious := filepath.Join(e.dir, "precious.db")
	if err := os.WriteFile(precious, []byte("not a scratch file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "other.db.many"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--db", precious, "--cpuprofile", prof}, "invalid db"},
		{[]string{"bench", "--db", filepath.Join(e.dir, "other.db"), "--cpuprofile", prof}, "FILE.many"},
		{[]string{"bench", "--db", filepath.Join(e.dir, "no-such-dir", "b.db")}, "existing directory"},
		{[]string{"bench", "--db", filepath.Join(e.dir, "b.db"), "--dir", e.dir}, "not both"},
		{[]string{"bench", "--profile-phase", "enqueue", "--cpuprofile", prof}, "profile-phase"},
		{[]string{"bench", "--jobs", "10", "junk", "--cpuprofile", prof}, "unexpected argument"},
		{[]string{"bench", "--max-conns-per-host", "-3"}, "max-conns-per-host"},
		{[]string{"bench", "--http-transport", "curl", "--cpuprofile", prof}, "http-transport"},
		{[]string{"bench", "--jobs", "0", "--cpuprofile", prof}, "jobs"},
	} {
		r := e.run(c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: got\n%s\nwant exit 2 naming %s", c.args, r, c.want)
		}
		if r.took > 5*time.Second {
			t.Errorf("%v took %s to refuse, want quick", c.args, r.took)
		}
	}
	if _, err := os.Stat(prof); !os.IsNotExist(err) {
		t.Errorf("refused bench left a profile file (stat err %v)", err)
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "not a scratch file" {
		t.Errorf("refused bench changed an existing --db file: %q, %v", b, err)
	}
}

// Bad flags of a bench on Postgres are refused before anything connects:
// exit 2 naming the flag, and never the URL's password.
func TestBenchPostgresBadFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Nothing listens on port 1: a flag that were not refused first
	// would fail on the connection instead, with another exit code.
	pg := "postgres://bench:s3cret@127.0.0.1:1/db"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--pg-conns", "8"}, "pg-conns"},
		{[]string{"bench", "--db", pg, "--pg-conns", "0"}, "pg-conns"},
		{[]string{"bench", "--db", pg, "--pg-conns", "1001"}, "pg-conns"},
		{[]string{"bench", "--db", pg, "--dir", e.dir}, "invalid dir"},
		{[]string{"bench", "--db", pg, "--preload", "10"}, "preload"},
		{[]string{"bench", "--db", "postgres://bench:s3cret@127.0.0.1:1/db?sslmode=nonsense"}, "invalid db"},
		{[]string{"bench", "--db", pg, "--jobs", "0"}, "jobs"},
		{[]string{"bench", "--db", pg, "--schema", "idemrun"}, "invalid schema"},
	} {
		r := e.run(c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: got\n%s\nwant exit 2 naming %s", c.args, r, c.want)
		}
		if strings.Contains(r.stderr, "s3cret") {
			t.Errorf("%v: the refusal shows the URL's password:\n%s", c.args, r.stderr)
		}
		if r.took > 5*time.Second {
			t.Errorf("%v took %s to refuse, want quick", c.args, r.took)
		}
	}
}
