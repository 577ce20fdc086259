package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// hintRun runs one command in this process, with no IDEMRUN_ variables.
func hintRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

// The store's errors about the file say what is wrong in the store's
// terms; the CLI adds the command or flag that acts on it.
func TestStoreErrorsGetTheCLIHint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := write("small.db", bytes.Repeat([]byte{0xa5}, 100))
	empty := write("empty.db", nil)
	sqlite := write("x.sqlite", append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0x5a}, 16<<10)...))
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		store string // the store's own words
		hint  string // the CLI's
	}{
		{"directory", []string{"stats", "--db", dir}, exitUsage,
			"is a directory, not a database file", "give a database file with --db FILE"},
		{"missing", []string{"stats", "--db", filepath.Join(dir, "missing.db")}, exitFailure,
			"missing.db does not exist", "enqueue a job (`idemrun enqueue`) to create it, or give another file with --db FILE"},
		{"empty", []string{"list", "--db", empty}, exitUsage,
			"is empty (0 bytes), not yet an idemrun database; check the path", "enqueue a job (`idemrun enqueue`) to lay it out, or give another file with --db FILE"},
		{"too small", []string{"show", "--db", small, "some-key"}, exitUsage,
			"is 100 bytes, too small to be a bbolt file; check the path", "give the path of an idemrun database with --db FILE"},
		{"not bbolt", []string{"list", "--db", sqlite}, exitUsage,
			"the file is not a bbolt file", "give the path of an idemrun database with --db FILE"},
	} {
		code, _, stderr := hintRun(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.store) || !strings.HasSuffix(strings.TrimSpace(stderr), "; "+tc.hint) {
			t.Errorf("%s: %v: exit %d, stderr\n%s\nwant exit %d, the store's %q and the CLI's hint %q at the end", tc.name, tc.args, code, stderr, tc.code, tc.store, tc.hint)
		}
	}

	// check itself names no check to run when it cannot open a file;
	// the other hints it keeps.
	code, stdout, _ := hintRun(t, "check", small)
	if code != exitFailure || !strings.Contains(stdout, "FAILED to open") || !strings.Contains(stdout, "too small") || strings.Contains(stdout, "idemrun check") ||
		!strings.Contains(stdout, "give the path of an idemrun database") {
		t.Errorf("check %s: exit %d, stdout\n%s\nwant exit 1, FAILED to open saying too small, no hint to run check, and the one to give a database", small, code, stdout)
	}
	code, stdout, _ = hintRun(t, "check", sqlite)
	if code != exitFailure || !strings.Contains(stdout, "FAILED to open") || strings.Contains(stdout, "idemrun check") || !strings.Contains(stdout, "give the path of an idemrun database") {
		t.Errorf("check %s: exit %d, stdout\n%s\nwant exit 1, FAILED to open, no hint to run check, and the one to give a database", sqlite, code, stdout)
	}
	code, _, stderr := hintRun(t, "check", empty)
	if code != exitUsage || !strings.Contains(stderr, "is empty") || !strings.Contains(stderr, "`idemrun enqueue`") {
		t.Errorf("check %s: exit %d, stderr\n%s\nwant exit 2 (nothing to check is invalid input), saying it is empty, with the enqueue hint", empty, code, stderr)
	}
}

// compact of a file whose records are damaged: the store says Check
// reports the damage, the CLI names the command.
func TestCompactDamagedRecordsHint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	fillDB(t, good)
	path := storetest.DamagedCopies(t, good, dir, "damaged-")["records-broken"]
	code, _, stderr := hintRun(t, "compact", "--db", path)
	want := "run `idemrun check " + path + "` to see what is damaged"
	if code != exitFailure || !strings.Contains(stderr, "the database itself has problems") || !strings.Contains(stderr, "Check reports the damage; "+want) {
		t.Errorf("compact of a file with damaged records: exit %d, stderr\n%.800s\nwant exit 1, the store's \"Check reports the damage\" and the CLI's %q", code, stderr, want)
	}
}

// hint covers each FileError problem and a missing file, and nothing else.
func TestHint(t *testing.T) {
	t.Parallel()
	base := errors.New("store: something")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&bolt.FileError{Path: "a b.db", Problem: bolt.FileDamaged, Err: base}, "run `idemrun check 'a b.db'` to see what is damaged"},
		{&bolt.FileError{Path: "x.sqlite", Problem: bolt.FileDamaged, Err: fmt.Errorf("%w: x.sqlite: invalid database", bolt.ErrNotDatabase)}, "give the path of an idemrun database with --db FILE"},
		{fmt.Errorf("compact: %w", &bolt.FileError{Path: "x.db", Problem: bolt.FileDamaged, Err: base}), "run `idemrun check x.db` to see what is damaged"},
		{&bolt.FileError{Path: "x.db", Problem: bolt.FileEmpty, Err: base}, "enqueue a job (`idemrun enqueue`) to lay it out, or give another file with --db FILE"},
		{&bolt.FileError{Path: "x", Problem: bolt.FileIsDirectory, Err: base}, "give a database file with --db FILE"},
		{fmt.Errorf("%w: x.db does not exist", bolt.ErrNoDatabase), "enqueue a job (`idemrun enqueue`) to create it, or give another file with --db FILE"},
		{bolt.ErrLocked, ""},
		{store.ErrNotFound, ""},
		{base, ""},
	} {
		if got := hint(tc.err); got != tc.want {
			t.Errorf("hint(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got, want := withHint(&bolt.FileError{Path: "x", Problem: bolt.FileIsDirectory, Err: base}), "store: something; give a database file with --db FILE"; got != want {
		t.Errorf("withHint = %q, want %q", got, want)
	}
	if got := withHint(base); got != base.Error() {
		t.Errorf("withHint without a hint = %q, want the message alone", got)
	}
}

// show adds the resolve command to a needs_attention job, whose reason
// says in the runner's terms what to check and that a person resolves it;
// other states get none.
func TestShowAddsResolveCommand(t *testing.T) {
	t.Parallel()
	reason := "key mismatch: the target answered 422; a person must check with the target, then resolve the job as succeeded or failed"
	j := &api.Job{ID: "0193abcd", Key: "k", State: store.StateNeedsAttention, Reason: reason, Method: "POST", URL: "http://h/x"}
	var buf bytes.Buffer
	if err := renderJob(&buf, j); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, reason) || !strings.Contains(out, "resolve with  idemrun resolve 0193abcd --as succeeded|failed --note TEXT") {
		t.Errorf("show of a needs_attention job:\n%s\nwant its reason and the resolve command", out)
	}
	for _, st := range []store.State{store.StateFailed, store.StateUnknown, store.StateSucceeded} {
		j.State = st
		buf.Reset()
		if err := renderJob(&buf, j); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "idemrun resolve") {
			t.Errorf("show of a %s job names resolve:\n%s", st, buf.String())
		}
	}
}

// A --url without its scheme is refused with the URL meant; one with
// another scheme gets no guess.
func TestSchemeHint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ url, want string }{
		{"127.0.0.1:8080/x", "; did you mean http://127.0.0.1:8080/x?"},
		{"localhost:8080/x", "; did you mean http://localhost:8080/x?"},
		{"api.example.com/pay", "; did you mean https://api.example.com/pay?"},
		{"ftp://api.example.com/pay", ""},
	} {
		r := e.run("enqueue", "--url", tc.url)
		if r.code != exitUsage || !strings.Contains(r.stderr, "invalid url") {
			t.Errorf("enqueue --url %s: got\n%s\nwant exit 2 refusing the url", tc.url, r)
			continue
		}
		if tc.want == "" && strings.Contains(r.stderr, "did you mean") {
			t.Errorf("enqueue --url %s: got\n%s\nwant no guess", tc.url, r)
		}
		if tc.want != "" && !strings.HasSuffix(strings.TrimSpace(r.stderr), tc.want) {
			t.Errorf("enqueue --url %s: got\n%s\nwant it to end with %q", tc.url, r, tc.want)
		}
	}
}
