//go:build !unix

package api

import "net"

// checkSocketFile has nothing to check where there are no unix sockets.
func checkSocketFile(string) error { return nil }

// checkPeer has nothing to check where there are no unix sockets.
func checkPeer(net.Conn) error { return nil }
