package store

import (
	"path/filepath"
	"sync"
	"testing"
)

// A new database file is acknowledged only after its directory is synced:
// until then a power loss could drop the file's name, and with it every
// job committed in it. Opening an existing file syncs nothing more.
func TestOpenSyncsTheDirectoryOfANewFile(t *testing.T) {
	var mu sync.Mutex
	var synced []string
	old := syncDir
	syncDir = func(dir string) error {
		mu.Lock()
		synced = append(synced, dir)
		mu.Unlock()
		return old(dir)
	}
	defer func() { syncDir = old }()
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("creating %s synced %v; want its directory once", path, synced)
	}
	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(synced) != 1 {
		t.Errorf("reopening an existing file synced %v again", synced[1:])
	}
}
