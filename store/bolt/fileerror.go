package bolt

import "fmt"

// FileProblem says what is wrong with a database file, for a FileError.
type FileProblem int

const (
	// FileDamaged: the file cannot be read as an idemrun database, or its
	// pages, records or counters are damaged, or it could not be opened
	// for another reason (an I/O error). DB.Check, on a read-only Open of
	// the file, reports what is damaged where the file opens at all; a
	// backup restores what is lost.
	FileDamaged FileProblem = iota + 1
	// FileEmpty: the file holds no idemrun database yet (0 bytes, or a
	// bbolt file with nothing in it), and the Open was not allowed to lay
	// one out (Options.MustExist or ReadOnly); a writable Open without
	// MustExist lays it out.
	FileEmpty
	// FileIsDirectory: the path names a directory, not a file.
	FileIsDirectory
)

func (p FileProblem) String() string {
	switch p {
	case FileDamaged:
		return "damaged"
	case FileEmpty:
		return "empty"
	case FileIsDirectory:
		return "directory"
	}
	return fmt.Sprintf("FileProblem(%d)", int(p))
}

// FileError is an error about the database file at Path itself rather
// than about one operation: a file Open refuses, damage a read or a write
// runs into, a commit that may not be on disk. It wraps the error that
// found the problem, so errors.Is still matches the sentinel that error
// carries (ErrNotDatabase, store.ErrCorrupt, store.ErrFailed, ...), and its
// message is that error's, in this package's terms. A program with its own
// way to act on Problem (a command that checks the file, a flag that names
// another one) finds it with errors.As and adds that.
type FileError struct {
	Path    string
	Problem FileProblem
	Err     error
}

func (e *FileError) Error() string { return e.Err.Error() }

// Unwrap returns the error that found the problem.
func (e *FileError) Unwrap() error { return e.Err }

// fileErr wraps err as a FileError about path.
func fileErr(path string, p FileProblem, err error) error {
	return &FileError{Path: path, Problem: p, Err: err}
}
