package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bad input to idemrun ui exits 2 naming the flag and the value, and
// creates no database.
func TestUIRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf, _ := writeToken(t, e, 0o600)
	weak := filepath.Join(e.dir, "weak")
	if err := os.WriteFile(weak, []byte("aaaaaaaaaaaaaaaa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"ui", "--db", e.db}, []string{"--token-file"}},
		{[]string{"ui", "--db", e.db, "--token-file", tf, "--listen", "nonsense"}, []string{"listen", `"nonsense"`, "HOST:PORT"}},
		{[]string{"ui", "--db", e.db, "--token-file", weak}, []string{"token-file", "openssl rand -hex 32"}},
		{[]string{"ui", "--db", e.db, "--token-file", filepath.Join(e.dir, "missing")}, []string{"token-file", "missing"}},
		{[]string{"ui", "--db", e.db, "--token-file", tf, "--tls-cert", tf}, []string{"--tls-cert", "--tls-key"}},
		{[]string{"ui", "--db", e.db, "--token-file", tf, "extra"}, []string{`"extra"`}},
	} {
		r := e.run(c.args...)
		if r.code != 2 {
			t.Errorf("%v: want exit 2, got\n%s", c.args, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr does not name %q:\n%s", c.args, w, r)
			}
		}
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("a refused ui left a database (stat err %v)", err)
	}
}

// waitHTTP gets url with the bearer token until it answers 200, for at
// most 15 s, and returns the body.
func waitHTTP(t *testing.T, url, token string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no 200 within 15 s (last error %v)", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idemrun ui serves the dashboard for a file no runner holds and for a
// Postgres database: with the token a page shows the jobs, without it a
// browser is sent to the login form; SIGTERM ends it with exit 0.
func TestUIServesTheDashboard(t *testing.T) {
	t.Parallel()
	t.Run("bolt", func(t *testing.T) {
		t.Parallel()
		testUIServes(t, newEnv(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		e := pgEnv(t)
		e.ok("migrate")
		testUIServes(t, e)
	})
}

func testUIServes(t *testing.T, e *env) {
	tf, token := writeToken(t, e, 0o600)
	out := strings.Fields(e.ok("enqueue", "--url", "http://127.0.0.1:9/pay", "--data", `{"a":1}`, "--run-at", "+10m").stdout)
	id := out[len(out)-1]
	addr := freePort(t)
	cmd := exec.Command(binPath, "ui", "--db", e.db, "--listen", addr, "--token-file", tf)
	cmd.Dir, cmd.Env = e.dir, e.environ()
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	body := waitHTTP(t, "http://"+addr+"/ui/jobs?state=pending", token)
	if !strings.Contains(body, id) {
		t.Fatalf("the jobs page does not list the pending job %s:\n%s", id, clip(body))
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get("http://" + addr + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Fatalf("GET /ui/ without the token: %s Location %q, want 303 to the login form", resp.Status, resp.Header.Get("Location"))
	}
	if !strings.Contains(logs.String(), "http://"+addr+"/ui/") {
		t.Errorf("the log does not give the dashboard's URL:\n%s", logs.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if werr != nil {
			t.Fatalf("after SIGTERM: %v\n%s", werr, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("idemrun ui did not stop within 10 s of SIGTERM")
	}
}

// idemrun run serves the dashboard at /ui/ on its TCP admin listener
// (with the token) and on its socket (without one).
func TestRunServesTheDashboard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf, token := writeToken(t, e, 0o600)
	addr := freePort(t)
	e.startRunner("--db", e.db, "--admin", addr, "--admin-token-file", tf, "--workers", "1")
	if body := waitHTTP(t, "http://"+addr+"/ui/", token); !strings.Contains(body, "Jobs by state") {
		t.Fatalf("the overview on TCP:\n%s", clip(body))
	}
	resp, err := unixClient(e.db + ".sock").Get("http://idemrun/ui/hosts")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "<h1>Hosts</h1>") {
		t.Fatalf("the hosts page on the socket: %s\n%s", resp.Status, clip(string(b)))
	}
}
