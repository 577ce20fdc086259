package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestPublishGivesTheNameAndRemovesTmp(t *testing.T) {
	dir := t.TempDir()
	tmp, final := filepath.Join(dir, "b.partial"), filepath.Join(dir, "b")
	if err := os.WriteFile(tmp, []byte("backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Publish(tmp, final); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(final); err != nil || string(got) != "backup" {
		t.Fatalf("final = %q, %v; want the tmp file's bytes", got, err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tmp still there after Publish: %v", err)
	}
}

// A file that appeared at the final name while the copy was written is
// never replaced: Publish reports fs.ErrExist and both files stay as they
// were, for the caller to clean up.
func TestPublishNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	tmp, final := filepath.Join(dir, "b.partial"), filepath.Join(dir, "b")
	if err := os.WriteFile(tmp, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(final, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Publish(tmp, final); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Publish over an existing file: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(final); string(got) != "someone else's" {
		t.Fatalf("final = %q: an existing file was replaced", got)
	}
	if got, _ := os.ReadFile(tmp); string(got) != "new" {
		t.Fatalf("tmp = %q, want it left for the caller", got)
	}
}

func TestSyncDirMissing(t *testing.T) {
	if err := SyncDir(filepath.Join(t.TempDir(), "nope")); err == nil && dirSync {
		t.Fatal("SyncDir of a missing directory: no error")
	}
}
