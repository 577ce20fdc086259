package bolt_test

import (
	"errors"
	"os"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// copyInOneTx makes a file whose one commit (txid 2, meta page 0) holds
// every job, while meta page 1 still holds bbolt's empty tree: what
// compact wrote for a small database before it committed twice.
func copyInOneTx(t *testing.T, dir string, pageSize int) string {
	t.Helper()
	src := dir + "/src.db"
	seedCompactable(t, src, 30, 30)
	sdb, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	path := dir + "/copy.db"
	ddb, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	if err := bbolt.Compact(ddb, sdb, 64<<20); err != nil {
		t.Fatal(err)
	}
	ddb.Close()
	return path
}

// The same fall-back to bbolt's empty tree as
// TestOpenRefusesAFileThatFellBackToAnEmptyTree, but meta page 0 is
// damaged where its magic is (a zeroed sector, the commonest damage)
// instead of where only the checksum notices: Open still finds the 30 job
// records in the file's pages and refuses it as corrupt.
func TestOpenRefusesWhenMetaMagicIsGone(t *testing.T) {
	path := copyInOneTx(t, t.TempDir(), 0)
	zeroFirstSector(t, path)
	err := openRefused(t, path, "a file with 30 jobs")
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

// A file with 16 KiB pages (made on a machine whose pages are 16 KiB) with
// meta page 0 gone: bbolt finds meta page 1 at 16 KiB, and so must idemrun
// (not at the OS page size), and the jobs are found in 16 KiB pages.
func TestOpenRefuses16KPagesMetaGone(t *testing.T) {
	if os.Getpagesize() == 16384 {
		t.Skip("OS page size is 16 KiB")
	}
	path := copyInOneTx(t, t.TempDir(), 16384)
	zeroFirstSector(t, path)
	t.Logf("Open: %v", openRefused(t, path, "a 16 KiB-page file with 30 jobs"))
}

// A new file whose first idemrun commit (the layout, txid 2, meta page 0)
// did not land whole: its meta page fails its checksum. No job was ever
// acknowledged in it, so Open lays it out again instead of refusing it for
// good.
func TestFirstCommitTornIsLaidOutAgain(t *testing.T) {
	path := t.TempDir() + "/new.db"
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[72] ^= 0x01 // meta page 0's checksum
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, nil)
	if err != nil {
		t.Fatalf("Open of a new file whose layout commit was torn (no job ever in it): %v", err)
	}
	db.Close()
}

// zeroFirstSector zeroes the first 512 bytes of the file at path: the
// first sector of bbolt's meta page 0, magic included.
func zeroFirstSector(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[:512])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openRefused opens the damaged file at path, which holds what says, and
// fails the test if Open accepted it (it would have laid out a fresh
// database over the jobs); it returns Open's error.
func openRefused(t *testing.T, path, what string) error {
	t.Helper()
	db, err := bolt.Open(path, nil)
	if err == nil {
		st, _ := db.Stats()
		db.Close()
		t.Fatalf("Open laid out a fresh database over %s (stats now %v); want ErrCorrupt", what, st)
	}
	return err
}
