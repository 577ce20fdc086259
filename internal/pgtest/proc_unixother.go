//go:build unix && !linux

package pgtest

import "syscall"

// dieWithParent does nothing where there is no parent-death signal: Main
// still stops the server when the tests end.
func dieWithParent(*syscall.SysProcAttr) {}
