// Package fsutil holds the file-system steps that make a new name durable.
package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// SyncDir makes the entries of dir durable: a file renamed or linked into
// it survives a power loss only after its directory has been synced.
func SyncDir(dir string) error {
	if !dirSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Publish gives the complete file tmp the name final, never replacing a
// file already there, and makes the new name durable. tmp is gone on
// success; on error tmp is left for the caller to remove, and a file
// already at final is untouched (the error is then fs.ErrExist).
//
// A hard link is what refuses an existing name atomically; on a file
// system without hard links Publish checks for final and renames, which
// leaves a moment in which a file created by someone else is replaced.
func Publish(tmp, final string) error {
	if err := os.Link(tmp, final); err == nil {
		if err := os.Remove(tmp); err != nil {
			return err
		}
	} else if errors.Is(err, fs.ErrExist) {
		return fs.ErrExist
	} else {
		if _, serr := os.Lstat(final); serr == nil {
			return fs.ErrExist
		}
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
	}
	return SyncDir(filepath.Dir(final))
}
