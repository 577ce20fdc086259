//go:build !unix

package bolt

import (
	"errors"
	"os"
)

type fileOwner struct {
	nlink    uint64
	uid, gid int
	ino      uint64
}

func ownerOf(os.FileInfo) (fileOwner, bool) { return fileOwner{}, false }

func lockExclusive(*os.File) error {
	return errors.New("not supported on this platform")
}

// compactSupported is false: replacing an open database file by rename,
// and holding the copy's lock across the rename, need Unix semantics.
const compactSupported = false
