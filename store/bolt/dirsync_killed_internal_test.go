package bolt

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemrun/idemrun/internal/fsutil"
)

// A process lays the file out and dies before its directory sync (here:
// the sync fails, so its Open never returned). The next Open finds a laid
// out file and syncs the directory before it acknowledges a write.
func TestLaidOutFileDirSyncedAtNextOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.db")
	killed := &Options{SyncDir: func(string) error { return errors.New("killed before the directory sync") }}
	if _, err := Open(path, killed); err == nil {
		t.Fatal("want the first Open to fail")
	}
	var synced int
	db, err := Open(path, &Options{SyncDir: func(dir string) error { synced++; return fsutil.SyncDir(dir) }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if synced == 0 {
		t.Errorf("second Open of a file whose directory entry was never synced: no directory sync before writes are acknowledged")
	}
}
