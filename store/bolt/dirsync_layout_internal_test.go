package bolt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemrun/idemrun/internal/fsutil"
)

// A file left empty (0 bytes) by a process killed between creating it and
// syncing its directory is laid out by the next Open, which syncs the
// directory then: whether the name existed before does not matter, the
// layout does.
func TestEmptyExistingFileLaidOutSyncsDir(t *testing.T) {
	var synced []string
	opts := &Options{SyncDir: func(dir string) error { synced = append(synced, dir); return fsutil.SyncDir(dir) }}
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(synced) == 0 {
		t.Errorf("laying out the empty file %s synced no directory", path)
	}
}
