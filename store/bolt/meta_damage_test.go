package bolt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// A file whose newest bbolt meta page is damaged while the older one still
// describes the empty file bbolt started with (a copy made in one
// transaction, as compact made before it committed twice) holds jobs that
// bbolt can no longer reach. Open must refuse it as corrupt, for writers
// too, and leave every byte as it was: laying out a fresh database there
// would report 0 jobs and free their keys for new, duplicate requests.
func TestOpenRefusesAFileThatFellBackToAnEmptyTree(t *testing.T) {
	dir := t.TempDir()
	src := dir + "/src.db"
	seedCompactable(t, src, 30, 30)
	sdb, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	path := dir + "/copy.db"
	ddb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bbolt.Compact(ddb, sdb, 64<<20); err != nil {
		t.Fatal(err)
	}
	ddb.Close()
	sdb.Close()

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The copy's one commit has transaction id 2, in meta page 0; meta
	// page 1 still holds bbolt's empty tree.
	if txid := binary.LittleEndian.Uint64(b[16+48:]); txid != 2 {
		t.Fatalf("meta page 0 has txid %d, want 2 (the copy's commit)", txid)
	}
	b[40] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*bolt.Options{nil, {MustExist: true}, {ReadOnly: true}} {
		db, err := bolt.Open(path, o)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Open(%+v) of a file fallen back to an empty tree: %v, want ErrCorrupt", o, err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
			t.Fatalf("Open(%+v) changed the file", o)
		}
	}
}
