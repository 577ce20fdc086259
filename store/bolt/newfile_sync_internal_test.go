package bolt

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/idemrun/idemrun/internal/fsutil"
)

// A database file is written only after its directory is synced: until
// then a power loss could drop a new file's name, and with it every job
// committed in it. Every writable Open syncs it, since a process killed
// after laying a file out but before the sync left nothing to tell by; a
// read-only Open does not.
func TestWritableOpenSyncsTheDirectory(t *testing.T) {
	var mu sync.Mutex
	var synced []string
	record := func(dir string) error {
		mu.Lock()
		synced = append(synced, dir)
		mu.Unlock()
		return fsutil.SyncDir(dir)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	db, err := Open(path, &Options{SyncDir: record})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("creating %s synced %v; want its directory once", path, synced)
	}
	db, err = Open(path, &Options{SyncDir: record})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(synced) != 2 || synced[1] != dir {
		t.Errorf("reopening the file synced %v; want its directory again", synced)
	}
	db, err = Open(path, &Options{ReadOnly: true, SyncDir: record})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(synced) != 2 {
		t.Errorf("a read-only open synced %v", synced[2:])
	}
}
