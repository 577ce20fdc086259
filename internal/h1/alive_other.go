//go:build !unix

package h1

import "net"

// idleConnAlive cannot peek at the socket without blocking here: an idle
// connection the server closed fails on use instead, after the request's
// headers were written (so NothingWritten cannot say it was not seen), and
// stray bytes are found only once they are above the socket (conn.quiet,
// br.Buffered).
func idleConnAlive(net.Conn) bool { return true }
