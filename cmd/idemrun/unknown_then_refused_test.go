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
)

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
