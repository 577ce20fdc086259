// Package loopback starts raw TCP servers on 127.0.0.1 for tests that
// answer below HTTP: odd framing, early answers, stalled handshakes,
// proxies.
package loopback

import (
	"net"
	"testing"
)

// Serve listens on 127.0.0.1 on a free port and runs serve in a goroutine
// of its own for every connection it accepts, closing the connection when
// serve returns. The listener is closed when the test ends; a serve that
// must hold its connection until then waits on t.Context().Done().
func Serve(t testing.TB, serve func(c net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln
}
