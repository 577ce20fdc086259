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
	"github.com/idemrun/idemrun/store/bolt"
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

// show escapes a job's URL and header values too, as its reason, errors and
// history: a bidirectional override (U+202E) or a C1 control (U+009B, CSI)
// that validation lets through never reaches the terminal raw.
func TestShowEscapesURLAndHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p\u202eab", "-H", "X-A: a\u202eb\u009b2Jc", "--key", "k1")
	r := e.ok("show", "--db", e.db, "k1")
	for _, bad := range []string{"\u202e", "\u009b"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("show printed %q raw:\n%q", bad, r.stdout)
		}
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

// Hostile input at the command line: every limit and malformed value is
// refused with exit 2 and a message naming the field, and the database is
// unchanged (stats, a full list and the file's bytes).
func TestCLIOutOfLimitAndMalformedInputRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const u = "http://127.0.0.1:9/pay"
	job := jsonObject(t, e.ok("enqueue", "--url", u, "--key", "hostile-existing", "--data", "x", "--json"))
	id := job["id"].(string)

	write := func(name string, b []byte) string {
		p := filepath.Join(e.dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := write("big.bin", make([]byte, 1<<20+1))
	nulLine := write("nul.jsonl", []byte(`{"url":"`+u+`","headers":{"X-A":"a\u0000b"}}`+"\n"))
	crlfLine := write("crlf.jsonl", []byte(`{"url":"`+u+`","header_lines":["X-A: a\r\nX-B: b"]}`+"\n"))
	unknownLine := write("unknown.jsonl", []byte(`{"url":"`+u+`","colour":"red"}`+"\n"))
	attemptsLine := write("attempts.jsonl", []byte(`{"url":"`+u+`"}`+"\n"+`{"url":"`+u+`","max_attempts":101}`+"\n"))
	offListLine := write("offlist.jsonl", []byte(`{"url":"http://example.com/pay"}`+"\n"))
	var manyHeaders []string
	for i := range 101 {
		manyHeaders = append(manyHeaders, "-H", fmt.Sprintf("X-H-%d: v", i))
	}
	enq := func(args ...string) []string { return append([]string{"enqueue", "--url", u}, args...) }

	tests := []struct {
		name string
		args []string
		want []string // the message must contain each (they name the field)
	}{
		{"body over 1 MiB", enq("--data-file", big), []string{"invalid body"}},
		{"101 headers", enq(manyHeaders...), []string{"invalid headers", "101"}},
		{"header bytes over 64 KiB", enq("-H", "X-Big: "+strings.Repeat("v", 64<<10)), []string{"invalid headers", "65536"}},
		{"URL over 8 KiB", []string{"enqueue", "--url", u + "?q=" + strings.Repeat("a", 8<<10)}, []string{"invalid url"}},
		{"URL with CR LF", []string{"enqueue", "--url", u + "\r\nHost: evil"}, []string{"invalid url"}},
		{"javascript URL", []string{"enqueue", "--url", "javascript:alert(1)"}, []string{"invalid url"}},
		{"key of 256 characters", enq("--key", strings.Repeat("k", 256)), []string{"invalid key"}},
		{"key with a space", enq("--key", "a b"), []string{"invalid key"}},
		{"status-url over 2048 bytes", enq("--status-url", u+"/{key}?"+strings.Repeat("p", 2048)), []string{"invalid status-url", "2048"}},
		{"max attempts 101", enq("--max-attempts", "101"), []string{"invalid max-attempts", "101"}},
		{"deadline 31 days", enq("--deadline", "744h"), []string{"invalid deadline"}},
		{"zero deadline", enq("--deadline", "0s"), []string{"invalid deadline"}},
		{"attempt timeout 11m", enq("--attempt-timeout", "11m"), []string{"invalid attempt-timeout"}},
		{"key TTL 366 days", enq("--key-ttl", "8784h"), []string{"invalid key-ttl"}},
		{"NUL in a header value", []string{"enqueue", "--from", nulLine}, []string{"line 1", "header X-A"}},
		{"CR LF in a header line", []string{"enqueue", "--from", crlfLine}, []string{"line 1", "header X-A"}},
		{"unknown field in --from", []string{"enqueue", "--from", unknownLine}, []string{"line 1"}},
		{"max attempts 101 on line 2 of --from", []string{"enqueue", "--from", attemptsLine}, []string{"line 2", "max-attempts"}},
		{"unicode in a header name", enq("-H", "Nämé: x"), []string{"invalid header name"}},
		{"Content-Length header", enq("-H", "Content-Length: 5"), []string{"invalid header name"}},
		{"method with a space", enq("--method", "PO ST"), []string{"invalid method"}},
		{"method with CR LF", enq("--method", "POST\r\nX: y"), []string{"invalid method"}},
		{"no-effect status 200", enq("--no-effect-status", "200"), []string{"invalid no-effect-status", "200"}},
		{"no-effect status not a number", enq("--no-effect-status", "abc"), []string{"no-effect-status"}},
		{"unknown key format", enq("--key-format", "bogus"), []string{"invalid key-format"}},
		{"--data and --data-file together", enq("--data", "x", "--data-file", big), []string{"--data", "--data-file"}},
		{"allow-host refuses another host", []string{"enqueue", "--allow-host", "127.0.0.1", "--url", "http://example.com/pay"}, []string{"invalid url host", "example.com"}},
		{"allow-host refuses 169.254.169.254", []string{"enqueue", "--allow-host", "169.254.169.254", "--url", "http://169.254.169.254/latest/meta-data"}, []string{"invalid url host", "169.254.169.254"}},
		{"allow-host refuses [fe80::1]", []string{"enqueue", "--allow-host", "[fe80::1]", "--url", "http://[fe80::1]/x"}, []string{"invalid url host", "fe80::1"}},
		{"allow-host refuses a status-url host", []string{"enqueue", "--allow-host", "127.0.0.1", "--url", u, "--status-url", "http://example.com/s/{key}"}, []string{"invalid url host"}},
		{"allow-host refuses in --from", []string{"enqueue", "--allow-host", "127.0.0.1", "--from", offListLine}, []string{"line 1", "url host"}},
		{"allow-host pattern '*'", []string{"enqueue", "--allow-host", "*", "--url", u}, []string{"invalid allow-host"}},
		{"list limit 10001", []string{"list", "--limit", "10001"}, []string{"invalid limit", "10001"}},
		{"list unknown state", []string{"list", "--state", "bogus"}, []string{"--state", "bogus"}},
		{"list cursor not hex", []string{"list", "--cursor", "zz"}, []string{"cursor"}},
		{"resolve note over 4096 bytes", []string{"resolve", id, "--as", "failed", "--note", strings.Repeat("n", 4097)}, []string{"invalid note"}},
		{"resolve without a note", []string{"resolve", id, "--as", "failed"}, []string{"invalid note"}},
		{"resolve as pending", []string{"resolve", id, "--as", "pending", "--note", "checked"}, []string{"invalid as", "pending"}},
		{"watch interval 1ms", []string{"watch", "--interval", "1ms", "--count", "1"}, []string{"invalid interval"}},
		{"run with 0 workers", []string{"run", "--workers", "0"}, []string{"invalid workers"}},
		{"run with an unknown log format", []string{"run", "--log-format", "xml"}, []string{"invalid log-format"}},
		{"backup over the database itself", []string{"backup", e.db}, []string{"invalid OUT"}},
	}
	before := e.dbState(e.db)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			r := e.run(append(tc.args, "--db", e.db)...)
			if r.code != 2 {
				t.Errorf("got\n%s\nwant exit 2", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, r)
				}
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
				t.Errorf("refusal with a panic:\n%s", r)
			}
			if r.stdout != "" {
				t.Errorf("refused command printed to stdout: %s", clip(r.stdout))
			}
			if after := e.dbState(e.db); after != before {
				t.Errorf("database changed by a refused command:\n got stats %s list %s\nwant stats %s list %s", after.stats, clip(after.list), before.stats, clip(before.list))
			}
		})
	}
}

// An explicit "key_format": "" in a --from line is refused (exit 2), as
// an empty --key-format is, not taken as the default.
func TestFromEmptyKeyFormatRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--key-format", ""); r.code != 2 {
		t.Fatalf("the flag: %s", r)
	}
	p := filepath.Join(e.dir, "kf.jsonl")
	if err := os.WriteFile(p, []byte(`{"url":"http://127.0.0.1:9/p","key_format":""}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run("enqueue", "--db", e.db, "--from", p); r.code != 2 {
		t.Errorf("--from with \"key_format\": \"\": want exit 2 like --key-format '', got\n%s", r)
	}
}

// Repeated --data values are joined with '&', as curl joins repeated -d
// values, @FILE parts included; before, the last one silently won.
func TestRepeatedDataJoinedLikeCurl(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	part := filepath.Join(e.dir, "part.txt")
	if err := os.WriteFile(part, []byte("c=3"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--key", "d1",
		"--data", "a=1", "--data", "b=2", "--data", "@"+part)
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--key", "d2", "--data", "only")
	db, err := bolt.Open(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for key, want := range map[string]string{"d1": "a=1&b=2&c=3", "d2": "only"} {
		j, err := db.GetByKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if string(j.Request.Body) != want {
			t.Errorf("%s: stored body %q, want %q", key, j.Request.Body, want)
		}
	}
}

// enqueue --from counts the lines whose jobs were already stored under
// their keys apart from the new ones, as a single enqueue says "existing"
// (it said "enqueued 3 jobs" for three repeats).
func TestFromSummaryCountsExistingJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := filepath.Join(e.dir, "three.jsonl")
	var lines string
	for _, k := range []string{"f1", "f2", "f3"} {
		lines += `{"url":"http://127.0.0.1:9/p","key":"` + k + `","data":"x"}` + "\n"
	}
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.ok("enqueue", "--db", e.db, "--from", p); !strings.Contains(r.stdout, "enqueued 3 jobs (0 already stored under their keys, 0 refused)") {
		t.Errorf("first --from: %s", r)
	}
	if r := e.ok("enqueue", "--db", e.db, "--from", p); !strings.Contains(r.stdout, "enqueued 0 jobs (3 already stored under their keys, 0 refused)") {
		t.Errorf("repeated --from: %s", r)
	}
}

// A --from line whose run_at is past its deadline is refused with the
// others before anything is written: exit 2, no job stored, as the
// single-job --run-at is.
func TestFromRunAtPastDeadlineRefusesTheBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := `{"url":"http://127.0.0.1:9/p","key":"good-line"}` + "\n" +
		`{"url":"http://127.0.0.1:9/p","key":"late-line","run_at":"40m"}` + "\n"
	r := e.runStdin([]byte(lines), "enqueue", "--db", e.db, "--from", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "run-at") || !strings.Contains(r.stderr, "line 2") {
		t.Errorf("enqueue --from with a run_at past the deadline:\n%s\nwant exit 2 naming line 2 and run-at", r)
	}
	if r := e.run("show", "--db", e.db, "good-line"); r.code == 0 {
		t.Errorf("the good line was stored although the batch was refused:\n%s", r)
	}
}

// enqueue refuses a duration flag out of its range with examples inside
// that range: no "2h" for an attempt timeout of at most 10 minutes.
func TestEnqueueDurationFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--attempt-timeout", "1h", "invalid attempt-timeout 1h: accepted: a positive duration up to 10m, such as 500ms, 30s, 5m"},
		{"--attempt-timeout", "0s", "invalid attempt-timeout 0s: accepted: a positive duration up to 10m, such as 500ms, 30s, 5m"},
		{"--deadline", "1000h", "invalid deadline 1000h: accepted: a positive duration up to 720h, such as 30s, 5m, 2h"},
	} {
		r := e.run("enqueue", "--url", "http://127.0.0.1:9/x", tc.flag, tc.value)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("enqueue %s %s: got\n%s\nwant exit 2 and %q", tc.flag, tc.value, r, tc.want)
		}
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("a refused enqueue created %s (stat err %v)", e.db, err)
	}
}
