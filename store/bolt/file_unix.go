//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// fileOwner is what compact needs to know of a file beyond its mode: its
// hard links and its owner.
type fileOwner struct {
	nlink    uint64
	uid, gid int
	ino      uint64
}

// ownerOf reads fi's links, owner and inode; ok is false where the
// platform does not say.
func ownerOf(fi os.FileInfo) (o fileOwner, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return o, false
	}
	return fileOwner{nlink: uint64(st.Nlink), uid: int(st.Uid), gid: int(st.Gid), ino: uint64(st.Ino)}, true
}

// lockExclusive takes f's flock without waiting: the lock bbolt takes,
// so an Open of the same file waits for it.
func lockExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// compactSupported reports whether Compact can replace a file here.
const compactSupported = true
