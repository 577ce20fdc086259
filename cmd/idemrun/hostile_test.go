package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Hostile input at the command line: every limit and malformed value is
// refused with exit 2 and a message naming the field, and the database is
// unchanged (stats, a full list and the file's bytes).
func TestCLIHostileInputs(t *testing.T) {
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
