package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file that is not an idemrun database gets no advice about its mode,
// only the refusal; a database readable by others still gets it.
func TestOpenHoldsWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	text := filepath.Join(e.dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("a line of text\n", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.run("list", "--db", text)
	if r.code != exitUsage || !strings.Contains(r.stderr, "not an idemrun database") || strings.Contains(r.stderr, "has mode") {
		t.Errorf("list on a text file: got\n%s\nwant exit 2 saying it is not an idemrun database, without the mode warning", r)
	}

	e.ok("enqueue", "--url", "http://127.0.0.1:9/x")
	if err := os.Chmod(e.db, 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.ok("list")
	if !strings.Contains(r.stderr, "has mode 0644") {
		t.Errorf("list on a database of mode 0644: got\n%s\nwant the mode warning", r)
	}
}
