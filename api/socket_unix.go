//go:build unix

package api

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkSocketFile refuses an admin socket another user could have put
// there: it must be a socket, owned by this user, with no permission for
// group or others (the runner creates it so). The CLI sends credentials
// and trusts the answers it gets through it.
func checkSocketFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s is not a socket", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d): not a runner of yours", path, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %v; a runner's socket allows only its owner", path, perm)
	}
	return nil
}

// checkPeer refuses a connection whose other end runs as another user
// (where the system says who it is).
func checkPeer(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	uid, known, err := peerUID(uc)
	if err != nil || !known {
		return err
	}
	if me := os.Geteuid(); uid != me {
		return fmt.Errorf("the process serving the admin socket runs as uid %d, not as this user (uid %d)", uid, me)
	}
	return nil
}
