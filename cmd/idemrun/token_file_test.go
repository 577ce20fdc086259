package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
)

// A weak token (too few distinct characters, a run, a repeat) is refused
// at start with exit 2, naming the flag and how to make a good one,
// without showing the token. Before, aaaaaaaaaaaaaaaa was taken (found by
// a probe).
func TestReadTokenFileRefusesWeakTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, weak := range []string{"aaaaaaaaaaaaaaaa", "abcdefghijklmnopqrstuvwxyz", "passwordpassword", "1234567890123456"} {
		tf := filepath.Join(e.dir, "weak-"+string(rune('a'+i)))
		if err := os.WriteFile(tf, []byte(weak+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := e.run("run", "--db", e.db, "--admin", freePort(t), "--admin-token-file", tf)
		if r.code != 2 || !strings.Contains(r.stderr, "admin-token-file") || !strings.Contains(r.stderr, "openssl rand -hex 32") {
			t.Errorf("token %q: got\n%s\nwant exit 2 naming --admin-token-file and how to make a token", weak, r)
		}
		mustNotContain(t, "stderr", r.stderr, weak)
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("a refused run left the database (stat err %v)", err)
	}
}

// The TCP admin API slows wrong tokens per client address (429 with
// Retry-After after admin.AuthBurst failures) and logs each failure with
// the client's address, never the token. Before, ~15k guesses a second
// went through with no throttling and no log line (found by a probe).
func TestAdminTCPThrottlesWrongTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf, token := writeToken(t, e, 0o600)
	addr := freePort(t)
	p := e.startRunner("--db", e.db, "--admin", addr, "--admin-token-file", tf, "--workers", "1")
	const guess = "guess-guess-0123456789abcdef"
	var last *http.Response
	start := time.Now()
	for range admin.AuthBurst + 5 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer "+guess)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		last = resp
	}
	if time.Since(start) < 4*admin.AuthRefill && (last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "") {
		t.Errorf("after %d wrong tokens: got %s Retry-After %q, want 429 with Retry-After", admin.AuthBurst+5, last.Status, last.Header.Get("Retry-After"))
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("runner exit after SIGTERM: got %d, want 0\n%s", code, p.logs)
	}
	logs := p.logs.String()
	if !strings.Contains(logs, "client=127.0.0.1") || !strings.Contains(logs, "wrong bearer token") {
		t.Errorf("runner logs do not name the client of the wrong tokens:\n%s", logs)
	}
	mustNotContain(t, "runner logs", logs, token, guess)
}
