//go:build unix

package main

import "syscall"

// withPrivateUmask runs fn with umask 077, so a file or socket fn creates is
// its owner's alone from its first moment.
func withPrivateUmask(fn func()) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	fn()
}

// privateSockets: the admin socket is served, made 0600 under umask 077,
// and its peers are checked (api.checkPeer).
const privateSockets = true

// unixFileModes: file modes say who may read a file.
const unixFileModes = true
