//go:build !unix

package runner

import "net"

// idleConnAlive cannot peek without blocking here; an idle connection the
// server closed fails on use instead.
func idleConnAlive(net.Conn) bool { return true }
