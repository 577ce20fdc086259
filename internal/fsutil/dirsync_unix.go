//go:build unix

package fsutil

const dirSync = true
