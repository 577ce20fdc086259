package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store/bolt/bolttest"
	"github.com/idemrun/idemrun/store/storetest"
)

// compact on a damaged file reports an error naming the file, never a
// panic, leaves the file as it was and no FILE.compact behind.
func TestCompactDamagedFile(t *testing.T) {
	e := newEnv(t)
	fillDB(t, e.db)
	for name, path := range storetest.DamagedCopies(t, e.db, e.dir, "damaged-") {
		t.Run(name, func(t *testing.T) {
			e := e.with(t)
			before, _ := os.ReadFile(path)
			r := e.run("compact", "--db", path)
			noCrash(t, r)
			if r.code == 0 {
				t.Errorf("compact of a damaged file succeeded:\n%s", r)
			} else if !strings.Contains(r.stderr, filepath.Base(path)) {
				t.Errorf("compact of a damaged file: got\n%s\nwant an error naming it", r)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("compact of a damaged file changed it")
			}
			if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("compact of a damaged file left %s.compact: %v", path, err)
			}
		})
	}
}

// compact of a file whose job pages are damaged (the rest opens) must
// report it like every other command does, not crash with bbolt's panic.
func TestCompactDamagedJobPage(t *testing.T) {
	e := newEnv(t)
	fillDB(t, e.db)
	bolttest.DamageJobLeaf(t, e.db)
	before, _ := os.ReadFile(e.db)
	if r := e.run("stats"); r.code != 0 {
		t.Logf("stats on the damaged file: %s", r)
	}
	r := e.run("compact")
	noCrash(t, r)
	if r.code == 0 || !strings.Contains(r.stderr, "jobs.db") {
		t.Errorf("compact of a damaged file: got\n%.1500s\nwant an error naming the file", r)
	}
	if after, _ := os.ReadFile(e.db); !bytes.Equal(before, after) {
		t.Error("compact of a damaged file changed it")
	}
	if _, err := os.Stat(e.db + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("compact of a damaged file left %s.compact behind: %v", e.db, err)
	}
}

// compact of a file with damaged job records refuses, and says the
// damage is in the database (so `idemrun check` it), not that its own copy
// went wrong.
func TestCompactDamagedRecordsMessage(t *testing.T) {
	e := newEnv(t)
	fillDB(t, e.db)
	path := storetest.DamagedCopies(t, e.db, e.dir, "damaged-")["records-broken"]
	r := e.run("compact", "--db", path)
	if r.code == 0 {
		t.Fatalf("compact of a file with damaged records succeeded:\n%s", r)
	}
	if strings.Contains(r.stderr, "the copy failed its check") || !strings.Contains(r.stderr, "idemrun check") {
		t.Errorf("compact of a file with damaged records: got\n%.800s\nwant it to say the database is damaged and to run idemrun check", r)
	}
}

// compact with a relative --db path (a process: the path is relative to
// its working directory, e.dir).
func TestCompactRelativePath(t *testing.T) {
	e := newEnv(t)
	fillDB(t, e.db)
	r := e.runProc("compact", "--db", filepath.Base(e.db))
	if r.code != 0 || !strings.Contains(r.stdout, "60 jobs kept") {
		t.Errorf("compact --db jobs.db (relative): got\n%s", r)
	}
	if r := e.ok("check"); !strings.Contains(r.stdout, "ok") {
		t.Errorf("check after compact: %s", r)
	}
}
