//go:build !unix

package fsutil

// dirSync is false: a directory cannot be opened for syncing here, and
// the file system makes renames durable itself.
const dirSync = false
