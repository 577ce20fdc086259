package bolt_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// A file whose freelist page is damaged is refused as damaged, every time:
// the first open must not leave the file locked for the next one in the
// same process (bbolt panics on such a page after it has locked the file).
func TestDamagedFreelistIsDamageEveryOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The current meta page (the higher transaction id) names the
	// freelist page; mark that page a branch page instead.
	const ps = 4096
	free, tx := uint64(0), uint64(0)
	for pg := range 2 {
		m := b[pg*ps+16:]
		if id := binary.LittleEndian.Uint64(m[48:]); id >= tx {
			tx, free = id, binary.LittleEndian.Uint64(m[32:])
		}
	}
	binary.LittleEndian.PutUint16(b[int(free)*ps+8:], 0x01)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := bolt.Open(path, &bolt.Options{LockTimeout: 100 * time.Millisecond})
		if !errors.Is(err, store.ErrCorrupt) || errors.Is(err, bolt.ErrLocked) {
			t.Fatalf("open %d of a file with a damaged freelist page: %v; want it refused as damaged, not locked", i+1, err)
		}
		if fe, ok := errors.AsType[*bolt.FileError](err); !ok || fe.Problem != bolt.FileDamaged {
			t.Errorf("open %d: %v; want a FileError with FileDamaged", i+1, err)
		}
	}
}
