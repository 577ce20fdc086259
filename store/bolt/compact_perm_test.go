//go:build unix

package bolt_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// Compact keeps the file's permission bits whatever the umask: a database
// shared with a group (0660) stays group-writable.
func TestCompactKeepsMode(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	seedCompactable(t, path, 100, 10)
	if err := os.Chmod(path, 0o660); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o022) // the usual umask
	defer syscall.Umask(old)
	if _, err := bolt.Compact(path, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("mode after compact = %o; want 0660 as before", fi.Mode().Perm())
	}
}

// Compact run by root (sudo idemrun compact) on a file the runner's user
// owns must leave the file owned by that user, or the runner can no longer
// open its own database.
func TestCompactKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand the file to another user")
	}
	path := t.TempDir() + "/idemrun.db"
	seedCompactable(t, path, 100, 10)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Skip(err)
	}
	if _, err := bolt.Compact(path, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("owner after compact = %d:%d, mode %o; want 65534:65534 as before (the runner's user cannot open it now)", st.Uid, st.Gid, fi.Mode().Perm())
	}
}

// Compact through a symlinked path compacts the file the link points to
// and keeps the link: otherwise the link becomes a regular file holding a
// copy, the real file keeps the old jobs, and two processes using the two
// names work two diverging copies of the same queue (every pending job
// would be sent by both).
func TestCompactSymlinkedPath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "idemrun.db")
	if err := os.Mkdir(filepath.Dir(real), 0o700); err != nil {
		t.Fatal(err)
	}
	seedCompactable(t, real, 100, 10)
	link := filepath.Join(dir, "idemrun.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	realBefore, _ := os.Stat(real)
	if _, err := bolt.Compact(link, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("after compact %s is no longer a symlink (mode %v, err %v)", link, fi.Mode(), err)
	}
	if _, err := os.Stat(link + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a copy is left: %v", err)
	}
	realAfter, _ := os.Stat(real)
	if os.SameFile(realBefore, realAfter) {
		t.Errorf("%s, the file the link points to, was not compacted (still %d bytes)", real, realAfter.Size())
	}
	// The two names must still be one queue.
	db, err := bolt.Open(link, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := storetest.NewJob("via-link", storetest.T0())
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = bolt.Open(real, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Get(j.ID); err != nil {
		t.Errorf("a job enqueued through %s is not in %s: %v (the names now are two databases)", link, real, err)
	}
}

// A file with more than one hard link is refused: renaming the copy over
// one name would leave the others on the old file, a second database.
func TestCompactRefusesHardLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idemrun.db")
	seedCompactable(t, path, 100, 10)
	if err := os.Link(path, filepath.Join(dir, "other.db")); err != nil {
		t.Skip(err)
	}
	fi, _ := os.Stat(path)
	if _, err := bolt.Compact(path, nil); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("Compact of a hard-linked file: %v; want a refusal naming the links", err)
	}
	if now, _ := os.Stat(path); !os.SameFile(fi, now) {
		t.Error("the file was replaced")
	}
}
