package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/pgtest"
)

// dyingRunner serves the admin socket beside db: health answers, every
// enqueue is read whole and its connection then closed unanswered (a
// runner that dies, or a successor that dies too). It counts enqueues.
func dyingRunner(t *testing.T, db string) *atomic.Int64 {
	t.Helper()
	sock := api.SocketPath(db)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	var posts atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		posts.Add(1)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &posts
}

// The runner takes the enqueue and dies twice (the re-send reaches another
// dying runner). The CLI gave the job its key itself; it names that key,
// which makes a re-run safe, and exits 3 (outcome unknown), not 1.
func TestTwiceUnknownNamesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	posts := dyingRunner(t, e.db)
	r := e.run("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/pay", "--data", "x", "--json")
	t.Logf("%s", r)
	if posts.Load() != 2 {
		t.Fatalf("runner saw %d enqueues, want 2", posts.Load())
	}
	if !strings.Contains(r.stderr, "same keys is safe") {
		t.Fatalf("no unknown-outcome advice: %s", r)
	}
	if !strings.Contains(r.stderr, "--key ") || !hasKeyLike(r.stderr+r.stdout) {
		t.Errorf("the CLI tells the user to enqueue again under the same key but names no key:\n%s", r)
	}
	if r.code != 3 {
		t.Errorf("exit %d after two unknown outcomes, want 3", r.code)
	}
}

// hasKeyLike reports a 26+ character token run that could be a generated key.
func hasKeyLike(s string) bool {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '"' || r == '(' || r == ')' || r == ';' || r == ',' || r == '\n' || r == ':'
	}) {
		if len(f) >= 20 && !strings.ContainsAny(f, "/.") {
			return true
		}
	}
	return false
}

// The same for a batch: every line's key is named, those the CLI made
// itself and those the file gave, and the exit status is 3.
func TestTwiceUnknownBatchNamesEveryKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	posts := dyingRunner(t, e.db)
	lines := `{"url":"http://127.0.0.1:9/pay","data":"a"}` + "\n" + `{"url":"http://127.0.0.1:9/pay","key":"given-2"}` + "\n"
	r := e.runStdin([]byte(lines), "enqueue", "--db", e.db, "--from", "-")
	if posts.Load() != 2 || r.code != 3 {
		t.Fatalf("runner saw %d batches, exit %d; want 2 and 3:\n%s", posts.Load(), r.code, r)
	}
	if !strings.Contains(r.stderr, "--from line 1: key ") || !strings.Contains(r.stderr, "--from line 2: key given-2") {
		t.Errorf("the keys of the lines are not all named:\n%s", r)
	}
}

// The first enqueue reaches a runner that dies unanswered; the one sent
// again gets a definite error (here the successor's store refuses writes:
// 500 internal). The first try's outcome is still unknown, so the key is
// named and the exit status is 3.
func TestUnknownThenRefusedNamesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sock := api.SocketPath(e.db)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o600)
	var posts atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(w, `{"ok":true}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		if posts.Add(1) == 1 {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		io.WriteString(w, `{"error":{"code":"internal","message":"store: failed; no more writes are taken"}}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	r := e.run("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/pay", "--data", "x")
	t.Logf("%s", r)
	if r.code != 3 || !strings.Contains(r.stderr, "--key ") {
		t.Errorf("first try unknown, second refused: exit %d, and the key the first try may have stored is %s; want exit 3 naming the key", r.code, map[bool]string{true: "named", false: "not named"}[strings.Contains(r.stderr, "--key ")])
	}
}

// On Postgres: every COMMIT reaches the server and its connection is then
// cut, so the CLI never hears whether the enqueue stored the job. It
// tries once more, hears nothing again, names the key and exits 3. The
// same enqueue again, under that key, finds the job the first COMMIT
// stored: one job, not two.
func TestPostgresCommitUnknownNamesTheKey(t *testing.T) {
	e := pgEnv(t)
	e.ok("migrate")
	proxy, err := pgtest.StartProxy(e.db, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetCutAfterCommit(1)
	cut := e.with(t)
	cut.db = proxy.URL
	args := []string{"enqueue", "--url", "http://127.0.0.1:9/pay", "--data", `{"n":1}`, "--key", "pay-cut-1"}
	r := cut.run(args...)
	if r.code != exitUnknown || !strings.Contains(r.stderr, "enqueue the same request again with --key pay-cut-1") {
		t.Fatalf("enqueue whose COMMIT is never answered: want exit 3 naming the key, got:\n%s", r)
	}
	if proxy.Cuts() < 2 {
		t.Errorf("the proxy cut %d COMMITs, want the first and the one sent again", proxy.Cuts())
	}
	again := jsonObject(t, e.ok(append(args, "--json")...))
	if again["existing"] != true {
		t.Errorf("the same enqueue again: %v, want the job the cut COMMIT stored (existing)", again)
	}
	if st := e.statsOf(); st["pending"] != 1 {
		t.Errorf("stats %v, want 1 pending job", st)
	}
}
