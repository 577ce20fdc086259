//go:build !unix

package main

// withPrivateUmask runs fn: there is no umask here.
func withPrivateUmask(fn func()) { fn() }

// privateSockets is false: the admin socket's peers cannot be checked
// here, so the runner serves none.
const privateSockets = false

// unixFileModes: there are no Unix file modes to check.
const unixFileModes = false
