package bolt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// A store opened by a relative path; the process then changes its working
// directory (a library user's os.Chdir). Nothing happened to the file, so
// the store goes on taking writes.
func TestRelativePathSurvivesChdir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	t.Chdir(a)
	db, err := bolt.Open("rel.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := storetest.T0()
	if _, err := db.Enqueue(ctx, storetest.NewJob("one", now)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(b); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(a)
	_, err = db.Enqueue(ctx, storetest.NewJob("two", now))
	if err != nil {
		t.Errorf("Enqueue after chdir (file untouched at %s): %v", filepath.Join(a, "rel.db"), err)
	}
	_, err = db.Enqueue(ctx, storetest.NewJob("three", now))
	t.Logf("and the next one: %v", err)
}

func TestSymlinkAndBindPathKeepTheStore(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.db")
	link := filepath.Join(dir, "link.db")
	os.WriteFile(real, nil, 0o600)
	os.Symlink(real, link)
	for _, p := range []string{link, os.Getenv("REV_BIND")} {
		if p == "" {
			continue
		}
		db, err := bolt.Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := db.Enqueue(ctx, storetest.NewJob(p+string(rune('a'+i)), storetest.T0())); err != nil {
				t.Errorf("%s: enqueue %d: %v", p, i, err)
			}
		}
		db.Close()
	}
}

// The file is deleted while open; the caller then enqueues a job it had
// enqueued before (a retry after a timeout, say). Nothing is committed, but
// the store still refuses: "already stored" would name a job that is in no
// file anyone will open again.
func TestExistingAfterDeleteRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := storetest.T0()
	j := storetest.NewJob("k1", now)
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	res, err := db.Enqueue(ctx, storetest.NewJob("k1", now))
	t.Logf("re-enqueue after delete: existing=%v err=%v", res.Existing, err)
	if err == nil {
		t.Errorf("Enqueue returned nil (existing=%v) after %s was deleted: the job is in no file at that path (P1)", res.Existing, path)
	}
	_, err = db.Enqueue(ctx, storetest.NewJob("k2", now))
	t.Logf("a new job then: %v", err)
}
