//go:build !unix

package main

// withPrivateUmask runs fn: there is no umask here.
func withPrivateUmask(fn func()) { fn() }
