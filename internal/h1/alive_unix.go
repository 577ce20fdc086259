//go:build unix

package h1

import (
	"net"
	"syscall"
)

// idleConnAlive peeks at an idle connection without blocking: it is alive
// when nothing is waiting on it. A closed connection (EOF), an error, or
// bytes nobody asked for (the server spoke out of turn, so the next
// response would be out of step) all mean it must not be used.
func idleConnAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // never wait for readability
	})
	return err == nil && alive
}
