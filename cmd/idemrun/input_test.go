package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
)

// Hostile and edge input at the command line: each case is refused with an
// error that names the field, or shown as what it is.

// A --from line that is not valid UTF-8 is refused (exit 2, naming the
// line), as --url, -H and --note are: encoding/json would replace each bad
// byte with U+FFFD, and the stored body, URL or header value would be other
// bytes than the file holds (P2).
func TestFromNonUTF8Refused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/pay", "--key", "existing")
	before := e.dbState(e.db)
	for name, line := range map[string]string{
		"data":   `{"url":"http://127.0.0.1:9/pay","key":"u-data","data":"a` + "\xff" + `b"}`,
		"url":    `{"url":"http://127.0.0.1:9/pay/` + "\xff" + `","key":"u-url"}`,
		"header": `{"url":"http://127.0.0.1:9/pay","key":"u-hdr","headers":{"X-A":"` + "\xfe" + `"}}`,
	} {
		p := filepath.Join(e.dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := e.run("enqueue", "--from", p)
		if r.code != 2 || !strings.Contains(r.stderr, "line 1") || !strings.Contains(r.stderr, "UTF-8") {
			t.Errorf("--from with a non-UTF-8 %s: got\n%s\nwant exit 2 naming line 1 and UTF-8", name, r)
		}
	}
	if after := e.dbState(e.db); after != before {
		t.Errorf("non-UTF-8 --from lines were stored (with U+FFFD in place of the bytes):\n got %s\nwant %s", clip(after.list), clip(before.list))
	}
}

// A field given twice under the very same name is refused like one given
// twice under names differing in case ("each field once"), instead of the
// last one silently winning.
func TestFromExactDuplicateFieldRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := filepath.Join(e.dir, "dup.jsonl")
	line := `{"url":"http://127.0.0.1:9/a","url":"http://127.0.0.1:9/b","key":"dup"}`
	if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("enqueue", "--from", p)
	if r.code != 2 || !strings.Contains(r.stderr, "each field once") {
		t.Errorf("--from %s: got\n%s\nwant exit 2: each field once", line, r)
	}
}

// A duration in a --from line is a string with its unit; a bare number is
// refused (seconds? nanoseconds?), as the admin API refuses it, and the
// error says what is accepted without offering a number.
func TestFromDurationNumberRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := filepath.Join(e.dir, "ns.jsonl")
	line := `{"url":"http://127.0.0.1:9/a","key":"ns","deadline":3600000000000}`
	if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("enqueue", "--from", p)
	if r.code != 2 || !strings.Contains(r.stderr, "deadline") || !strings.Contains(r.stderr, `"15m"`) || strings.Contains(r.stderr, "or nanoseconds") {
		t.Errorf("--from with deadline as a number: got\n%s\nwant exit 2 naming deadline and a duration string, no offer of nanoseconds", r)
	}
}

// enqueue --from --json prints a JSON array, [] when there are no jobs
// (not null, which a script iterating the array with jq '.[]' cannot take).
func TestFromEmptyJSONArray(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runStdin([]byte("\n  \n"), "enqueue", "--from", "-", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("enqueue --from (no jobs) --json: got\n%s\nwant exit 0 and []", r)
	}
}

// A body or --from path that is a directory is invalid input: exit 2 and a
// message naming the flag, as for a missing file (not a read error, or for
// --from a complaint about line length); so is an empty backup OUT.
func TestInputPathIsDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "dir-existing")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "--url", "http://127.0.0.1:9/a", "--data-file", e.dir}, "data-file"},
		{[]string{"enqueue", "--url", "http://127.0.0.1:9/a", "--data", "@" + e.dir}, "data"},
		{[]string{"enqueue", "--from", e.dir}, "is a directory"},
		{[]string{"backup", ""}, "OUT"},
	} {
		r := e.run(c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "2 MiB") {
			t.Errorf("got\n%s\nwant exit 2 naming %q", r, c.want)
		}
	}
}

// A read command never writes: stats on an existing empty file is refused
// and the file stays 0 bytes (only enqueue and run lay out a database).
// After compact, both bbolt meta pages describe the copied jobs, so a
// damaged meta page, either one, costs nothing: stats still reads the 3
// jobs and leaves the file as it is, and check names the damaged page.
func TestReadCommandsNeverLayOutAFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	empty := filepath.Join(e.dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"stats", "list", "compact"} {
		r := e.run(cmd, "--db", empty)
		if fi, _ := os.Stat(empty); r.code == 0 || fi.Size() != 0 || !strings.Contains(r.stderr, "empty") {
			t.Errorf("%s on an empty file: got\n%s\nfile now %d bytes; want a refusal saying it is empty, and the file untouched", cmd, r, fi.Size())
		}
	}

	for _, k := range []string{"m-1", "m-2", "m-3"} {
		e.ok("enqueue", "--url", "http://127.0.0.1:9/pay", "--key", k)
	}
	e.ok("compact")
	orig, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.LittleEndian.Uint32(orig[24:28]))
	for page := range 2 {
		b := bytes.Clone(orig)
		b[page*pageSize+40] ^= 0xff // inside the meta page's checksummed root field
		db := filepath.Join(e.dir, fmt.Sprintf("meta%d.db", page))
		if err := os.WriteFile(db, b, 0o600); err != nil {
			t.Fatal(err)
		}
		st := e.statsOf("--db", db)
		if st["pending"] != 3 {
			t.Errorf("meta page %d damaged after compact: stats %v, want the 3 pending jobs", page, st)
		}
		if after, _ := os.ReadFile(db); !bytes.Equal(after, b) {
			t.Errorf("meta page %d damaged: stats changed the file", page)
		}
		if r := e.run("check", db); r.code != 1 || !strings.Contains(r.stdout, fmt.Sprintf("meta page %d", page)) {
			t.Errorf("check with meta page %d damaged: got\n%s\nwant exit 1 naming meta page %d", page, r, page)
		}
	}
}

// show escapes control characters in the target's answer: a target (or
// anything on a plain http path) could otherwise send terminal escapes that
// clear the screen, retitle the window or overwrite the state line.
func TestShowEscapesControlCharacters(t *testing.T) {
	j := &api.Job{ID: "id", Key: "k", State: "failed", Method: "POST", URL: "http://h/x",
		Result: &api.Result{HTTPStatus: 400, Body: "\x1b[2J\x1b]0;t\x07state    succeeded\rX", Source: "attempt"}}
	var buf bytes.Buffer
	if err := renderJob(&buf, j); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("show printed control characters from the target's body: %q", out)
	}
}

// A field a --from line gives with an empty or zero value is refused, as
// the flags refuse an empty --key, --max-attempts 0 or --deadline 0; so is
// an empty --method. Leaving a field out takes the default.
func TestExplicitEmptyValuesRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "zero-existing")
	before := e.dbState(e.db)
	for _, c := range []struct{ field, line string }{
		{"method", `{"url":"http://127.0.0.1:9/a","method":""}`},
		{"key", `{"url":"http://127.0.0.1:9/a","key":""}`},
		{"max_attempts", `{"url":"http://127.0.0.1:9/a","max_attempts":0}`},
		{"deadline", `{"url":"http://127.0.0.1:9/a","deadline":"0s"}`},
		{"key_ttl", `{"url":"http://127.0.0.1:9/a","key_ttl":"0s"}`},
		{"attempt_timeout", `{"url":"http://127.0.0.1:9/a","attempt_timeout":"-1s"}`},
		{"run_at", `{"url":"http://127.0.0.1:9/a","run_at":"tomorrow"}`},
	} {
		r := e.runStdin([]byte(c.line+"\n"), "enqueue", "--from", "-")
		if r.code != 2 || !strings.Contains(r.stderr, "line 1: "+c.field) {
			t.Errorf("--from %s: got\n%s\nwant exit 2 naming line 1: %s", c.line, r, c.field)
		}
	}
	if r := e.run("enqueue", "--url", "http://127.0.0.1:9/a", "--method", ""); r.code != 2 || !strings.Contains(r.stderr, "method") {
		t.Errorf("--method '': got\n%s\nwant exit 2 naming method", r)
	}
	if after := e.dbState(e.db); after != before {
		t.Errorf("refused input changed the database")
	}
}

// --run-at and a --from line's run_at delay the first attempt, given as a
// time or as a duration from now; a time past the deadline is refused.
func TestRunAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	at := time.Now().Add(40 * time.Minute).UTC().Truncate(time.Second)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "at-time", "--run-at", at.Format(time.RFC3339), "--deadline", "1h")
	t0 := time.Now()
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "at-dur", "--run-at", "10m")
	e.runStdin([]byte(`{"url":"http://127.0.0.1:9/a","key":"at-line","deadline":"1h","run_at":"`+at.Format(time.RFC3339)+`"}`+"\n"), "enqueue", "--from", "-")
	next := func(key string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, e.showJob(key)["next_run_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	if got := next("at-time"); !got.Equal(at) {
		t.Errorf("--run-at %s: next_run_at %s", at.Format(time.RFC3339), got)
	}
	if got := next("at-line"); !got.Equal(at) {
		t.Errorf("run_at %s: next_run_at %s", at.Format(time.RFC3339), got)
	}
	if d := next("at-dur").Sub(t0); d < 9*time.Minute || d > 11*time.Minute {
		t.Errorf("--run-at 10m: next_run_at %s after enqueue", d)
	}
	for _, bad := range []string{"soon", "-5m", "0s", time.Now().Add(48 * time.Hour).Format(time.RFC3339)} {
		r := e.run("enqueue", "--url", "http://127.0.0.1:9/a", "--run-at", bad, "--deadline", "1h")
		if r.code != 2 || !strings.Contains(r.stderr, "run-at") {
			t.Errorf("--run-at %s: got\n%s\nwant exit 2 naming run-at", bad, r)
		}
	}
}

// idemrun with no arguments is a usage error: usage on stderr, exit 2,
// like an unknown command; `idemrun help` prints it on stdout, exit 0.
func TestNoArgumentsIsAUsageError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run(); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "usage:") {
		t.Errorf("idemrun: got\n%s\nwant exit 2, usage on stderr only", r)
	}
	if r := e.run("help"); r.code != 0 || !strings.Contains(r.stdout, "usage:") {
		t.Errorf("idemrun help: got\n%s\nwant exit 0, usage on stdout", r)
	}
}

// A backup killed midway leaves its partial copy behind; it does not block
// the next backup to the same OUT, and the next one leaves it alone.
func TestBackupAfterAKilledOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "bk")
	out := filepath.Join(e.dir, "b.db")
	for _, left := range []string{out + ".partial", out + ".partial-123"} {
		if err := os.WriteFile(left, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.ok("backup", out)
	if r := e.run("check", out); r.code != 0 {
		t.Errorf("check of the backup: %s", r)
	}
	if b, _ := os.ReadFile(out + ".partial-123"); string(b) != "half" {
		t.Error("another backup's partial copy was touched")
	}
}

// The api's refusals speak its own terms; the CLI names the flag behind
// them where it prints them.
func TestRefusalsNameTheFlag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"enqueue", "--url", "http://other.example/x", "--allow-host", "good.example"}, "--allow-host"},
		{[]string{"enqueue", "--url", "http://u:p@127.0.0.1:9/x"}, "-H 'Authorization"},
		{[]string{"enqueue", "--url", "http://127.0.0.1:9/x", "-H", "Idempotency-Key: mine"}, "--key"},
	} {
		if r := e.run(c.args...); r.code != 2 || !strings.Contains(r.stderr, c.flag) {
			t.Errorf("idemrun %v: got\n%s\nwant exit 2 naming %s", c.args, r, c.flag)
		}
	}
	_, err := api.Validate(api.Request{URL: "http://other.example/x"}, api.EnqueueOptions{}, []string{"good.example"})
	if err == nil || strings.Contains(err.Error(), "--") {
		t.Errorf("the api's refusal of a host off the allowlist: %v, want one that names no flag", err)
	}
}
