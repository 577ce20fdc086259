package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Refusals never echo a secret: a status URL template with a token and a
// header line without its colon (it may be a credential) are shown
// redacted or cut.
func TestCLIRefusalsHideSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{
		{"enqueue", "--url", "http://127.0.0.1:9/a", "--status-url", "http://127.0.0.1:9/s?token=SEKRIT_TPL"},
		{"enqueue", "--url", "http://127.0.0.1:9/a", "--status-url", "http://127.0.0.1:9/s/{key}?token=SEKRIT_TPL#frag"},
		{"enqueue", "--url", "http://127.0.0.1:9/a", "-H", "Authorization Bearer SEKRIT_HDR"},
	} {
		r := e.run(args...)
		if r.code != 2 {
			t.Errorf("%v: got\n%s\nwant exit 2", args, r)
		}
		mustNotContain(t, "refusal of "+args[len(args)-1], r.stdout+r.stderr, "SEKRIT_TPL", "SEKRIT_HDR")
	}
}

// A socket beside the database that the runner did not make (here: mode
// open to others, as a planted one would be) is refused with a warning:
// no request, and so no credential, goes to it, and the command works on
// the file instead.
func TestCLIPlantedSocketRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("unix", e.db+".sock")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.db+".sock", 0o777); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"job":{"id":"01a23000-0000-7000-8000-000000000000","key":"k","state":"pending"},"existing":false}`)
			return
		}
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	r := e.run("enqueue", "--url", "http://127.0.0.1:9/pay", "-H", "Authorization: Bearer SEKRIT_PLANT", "--key", "order-1", "--json")
	srv.Close()
	mu.Lock()
	all := strings.Join(bodies, "\n")
	mu.Unlock()
	if all != "" {
		t.Errorf("the CLI talked to a socket open to everyone:\n%s", all)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "admin socket refused") {
		t.Fatalf("enqueue beside a planted socket: got\n%s\nwant exit 0 and a warning that the socket was refused", r)
	}
	os.Remove(e.db + ".sock")
	if j := e.showJob("order-1"); j["id"] != jsonObject(t, r)["id"] {
		t.Errorf("the job enqueued beside a planted socket is not the one in the file: %v", j)
	}
}

// A --from batch the admin API could not carry in one request is refused
// the same way with or without a runner: exit 2 naming --from, nothing
// written.
func TestCLIFromBatchLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	closed := "http://" + freePort(t) + "/x"
	var b strings.Builder
	data := strings.Repeat("x", 1<<20)
	for i := range 50 {
		line, _ := json.Marshal(map[string]any{"url": closed, "key": "big-" + strings.Repeat("k", i+1), "data": data})
		b.Write(line)
		b.WriteByte('\n')
	}
	from := filepath.Join(e.dir, "big.jsonl")
	if err := os.WriteFile(from, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("enqueue", "--url", closed, "--key", "first") // so a runner has a file to hold
	total := func() (n int64) {
		for _, c := range e.statsOf() {
			n += c
		}
		return n
	}
	check := func(where string) {
		t.Helper()
		// A process: the binary, built without the race detector, reads
		// the 50 MiB in well under a second; in this process it takes
		// over 20 s.
		r := e.runProc("enqueue", "--from", from)
		if r.code != 2 || !strings.Contains(r.stderr, "invalid from") || !strings.Contains(r.stderr, "64 MiB") {
			t.Errorf("%s: got\n%s\nwant exit 2 naming from and the 64 MiB limit", where, r)
		}
	}
	check("on the file")
	p := e.startRunner("--db", e.db, "--backoff-base", "1h", "--backoff-cap", "2h")
	check("through the runner's socket")
	p.stop(syscall.SIGTERM)
	if n := total(); n != 1 {
		t.Errorf("after the refused --from the file holds %d jobs, want only the first one", n)
	}
}
