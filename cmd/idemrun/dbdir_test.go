package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A --db in a directory that does not exist is invalid input for the
// commands that would create it: exit 2, the directory named once, and
// no advice to run check.
func TestDBDirError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	missing := filepath.Join(e.dir, "missing-dir", "x.db")
	for _, args := range [][]string{
		{"run", "--db", missing},
		{"enqueue", "--db", missing, "--url", "http://127.0.0.1:9/x"},
	} {
		r := e.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, filepath.Dir(missing)+" does not exist; create it, or give another --db") ||
			strings.Count(r.stderr, missing) != 1 || strings.Contains(r.stderr, "idemrun check") {
			t.Errorf("%s with a --db in a missing directory: got\n%s\nwant exit 2 naming the path once and the missing directory, no check", args[0], r)
		}
	}
}
