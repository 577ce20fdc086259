package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
)

// CompactResult is what Compact did.
type CompactResult struct {
	BytesBefore     int64         `json:"bytes_before"`
	BytesAfter      int64         `json:"bytes_after"`
	FreePagesBefore int           `json:"free_pages_before"`
	Jobs            int           `json:"jobs"`
	Took            time.Duration `json:"-"`
	TookMs          float64       `json:"took_ms"`
}

// compactTxSize bounds the bytes copied per transaction into the new file.
const compactTxSize = 64 << 20

// Compact rewrites the database at path into a new file holding only its
// live pages, checks the copy, and puts it in the file's place. bbolt never
// gives pages back to the file system and writes its whole freelist on
// every commit, so after the sweeper has deleted many jobs at once the file
// stays large and every commit pays for the free pages; Compact ends both.
//
// It needs the file to itself: it holds the exclusive lock for its whole
// run (a running runner makes it fail with ErrLocked), and it replaces the
// file by renaming the copy over it, so the copy is either the whole new
// file or not there. Open notices a file replaced while it waited for the
// lock and opens the new one. On any error the original is left as it was
// and the partial copy (path + ".compact") is removed.
func Compact(path string, opts *Options) (CompactResult, error) {
	start := time.Now()
	var res CompactResult
	if !compactSupported {
		return res, fmt.Errorf("store: compact %s: %w on this platform (it renames the copy over the open file, which needs Unix semantics); copy the jobs with Backup instead", path, errors.ErrUnsupported)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.ReadOnly = false
	o.MustExist = true
	// Compact the file itself, not a link to it: renaming the copy over a
	// symbolic link would make the link a second database beside the one
	// it pointed to.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	src, err := Open(path, &o)
	if err != nil {
		return res, err
	}
	defer src.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("store: compact %s: %w", path, err)
	}
	own, known := ownerOf(fi)
	if known && own.nlink > 1 {
		return res, fmt.Errorf("store: compact %s: the file has %d hard links; compacting would leave the other names on the old file, a second database: remove the other links first", path, own.nlink)
	}
	res.BytesBefore = fi.Size()
	res.FreePagesBefore = src.bolt.Stats().FreePageN
	before, err := src.Stats()
	if err != nil {
		return res, err
	}

	tmp := path + ".compact"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return res, fmt.Errorf("store: compact %s: %s exists, left by an interrupted compact; the database itself was not touched: remove %s, then compact again", path, tmp, tmp)
		}
		return res, fmt.Errorf("store: compact %s: %w", path, err)
	}
	// The copy gets the file's mode (fchmod, past the umask) and owner, so
	// the runner's user can still open it when someone else compacts.
	err = f.Chmod(fi.Mode().Perm())
	if err == nil && known {
		err = f.Chown(own.uid, own.gid)
	}
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("store: compact %s: giving the copy the file's owner and mode: %w; compact it as the file's owner", path, err)
	}
	done := false
	defer func() {
		if !done {
			os.Remove(tmp)
		}
	}()
	dst, err := openBolt(tmp, fi.Mode().Perm(), &bbolt.Options{Timeout: time.Second, FreelistType: bbolt.FreelistArrayType, PageSize: src.bolt.Info().PageSize})
	if err != nil {
		return res, fmt.Errorf("store: compact %s: %w", path, err)
	}
	// bbolt panics on a damaged page; the copy reads through bbolt's own
	// View, so its panics are turned into ErrCorrupt here.
	if err := func() (err error) {
		defer src.recoverCorrupt(&err)
		if err := bbolt.Compact(dst, src.bolt, compactTxSize); err != nil {
			return err
		}
		// One more commit, so both meta pages describe the copied tree:
		// after a copy in one transaction the older one still describes
		// the empty file bbolt started with, and a damaged newest meta
		// page would fall back to it.
		return dst.Update(func(*bbolt.Tx) error { return nil })
	}(); err != nil {
		dst.Close()
		return res, fmt.Errorf("store: compact %s: copying: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		return res, fmt.Errorf("store: compact %s: %w", path, err)
	}
	if err := checkCompacted(tmp, before); err != nil {
		if rep, serr := src.Check(); serr != nil || !rep.OK() {
			return res, fileErr(path, FileDamaged, fmt.Errorf("store: compact %s: the database itself has problems (%v); it was not touched: Check reports the damage", path, err))
		}
		return res, fmt.Errorf("store: compact %s: the copy failed its check, the database was not touched: %w", path, err)
	}
	// Hold the copy's lock from before the rename until the rename is
	// durable: a process that opens the new file in between must not
	// commit into it while a power loss could still bring the old one back.
	lk, err := os.Open(tmp)
	if err != nil {
		return res, fmt.Errorf("store: compact %s: %w", path, err)
	}
	defer lk.Close()
	if err := lockExclusive(lk); err != nil {
		return res, fmt.Errorf("store: compact %s: locking the copy: %w", path, err)
	}
	if o.CompactBeforeRename != nil {
		o.CompactBeforeRename()
	}
	if err := os.Rename(tmp, path); err != nil {
		return res, fmt.Errorf("store: compact %s: %w", path, err)
	}
	done = true
	if err := o.syncDir(filepath.Dir(path)); err != nil {
		return res, fmt.Errorf("store: compact %s: the compacted file is in place, but syncing its directory failed: %w", path, err)
	}
	lk.Close()
	if fi, err := os.Stat(path); err == nil {
		res.BytesAfter = fi.Size()
	}
	for _, n := range before {
		res.Jobs += int(n)
	}
	res.Took = time.Since(start)
	res.TookMs = float64(res.Took) / float64(time.Millisecond)
	return res, nil
}

// checkCompacted opens the copy read-only, runs Check on it and compares
// its counters with the original's.
func checkCompacted(path string, want map[store.State]int64) error {
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	rep, err := db.Check()
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("%d problems, first: %s", len(rep.Problems), rep.Problems[0])
	}
	got, err := db.Stats()
	if err != nil {
		return err
	}
	for _, s := range store.States() {
		if got[s] != want[s] {
			return fmt.Errorf("%s jobs: %d in the copy, %d in the original", s, got[s], want[s])
		}
	}
	return nil
}
