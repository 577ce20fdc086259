package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeToken(t *testing.T, e *env, mode os.FileMode) (string, string) {
	t.Helper()
	const token = "review-admin-token-0123456789abcdef"
	tf := filepath.Join(e.dir, "token")
	if err := os.WriteFile(tf, []byte(token+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tf, mode); err != nil {
		t.Fatal(err)
	}
	return tf, token
}

// connOpenAfter reports whether the server still holds c open after d: it
// reads until EOF or d passes.
func connOpenAfter(c net.Conn, d time.Duration, trickle bool) (open bool, got string) {
	deadline := time.Now().Add(d)
	buf := make([]byte, 4096)
	for time.Now().Before(deadline) {
		if trickle {
			if _, err := c.Write([]byte("x")); err != nil {
				return false, got
			}
		}
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		got += string(buf[:n])
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return false, got
		}
	}
	return true, got
}

// A client without the token keeps no connection to the TCP admin API
// (nor its goroutine and descriptor): not idle after one refused request,
// nor by sending a declared body one byte at a time (the refusal does not
// wait to read the body).
func TestAdminTCPUnauthenticatedConnectionsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf, _ := writeToken(t, e, 0o600)
	addr := freePort(t)
	p := e.startRunner("--db", e.db, "--admin", addr, "--admin-token-file", tf, "--workers", "1")
	defer p.stop(syscall.SIGTERM)

	const hold = 20 * time.Second // twice the server's ReadHeaderTimeout
	type res struct {
		what string
		open bool
		got  string
	}
	out := make(chan res, 2)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			out <- res{"idle", false, err.Error()}
			return
		}
		defer c.Close()
		fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		st, _ := bufio.NewReader(c).ReadString('\n')
		open, _ := connOpenAfter(c, hold, false)
		out <- res{"idle keep-alive after a 401 (" + strings.TrimSpace(st) + ")", open, ""}
	}()
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			out <- res{"slow body", false, err.Error()}
			return
		}
		defer c.Close()
		fmt.Fprint(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n")
		open, got := connOpenAfter(c, hold, true)
		out <- res{"unauthenticated body trickled at ~2 bytes/s", open, got}
	}()
	for range 2 {
		r := <-out
		if r.open {
			t.Errorf("%s: the connection is still open after %s (no idle/read timeout on the TCP admin API); got %q", r.what, hold, r.got)
		}
	}
}

// A token file other users can read is refused, naming the file (the CLI
// refuses a socket with group/other bits for the same reason); so is a
// token with a line break inside, which no HTTP client could send.
func TestAdminTokenFileRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf, _ := writeToken(t, e, 0o644)
	addr := freePort(t)
	p := e.spawnRunner("--db", e.db, "--admin", addr, "--admin-token-file", tf, "--workers", "1")
	select {
	case <-p.exited:
		t.Logf("runner exited %d: %s", p.code, p.logs)
		if !strings.Contains(p.logs.String(), "admin-token-file") {
			t.Errorf("runner refused, but not naming the token file: %s", p.logs)
		}
		return
	case <-p.started:
	case <-time.After(15 * time.Second):
		t.Fatal("runner did not start")
	}
	defer p.stop(syscall.SIGTERM)
	t.Errorf("runner started with a world-readable (0644) token file:\n%s", p.logs)
}

func TestAdminTokenWithLineBreakRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf := filepath.Join(e.dir, "two-lines")
	if err := os.WriteFile(tf, []byte("0123456789abcdef\nsecond-line-here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("run", "--db", e.db, "--admin", freePort(t), "--admin-token-file", tf)
	if r.code != 2 || !strings.Contains(r.stderr, "line breaks") {
		t.Errorf("a two-line token file: got\n%s\nwant exit 2 saying a token has no line breaks", r)
	}
}

// Small protocol points of the TCP admin API: the auth scheme is
// case-insensitive (RFC 9110 §11.1), an over-limit body is answered with
// the documented too_large code, and HEAD does not stream a whole backup.
func TestAdminTCPProtocolDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tf, token := writeToken(t, e, 0o600)
	addr := freePort(t)
	p := e.startRunner("--db", e.db, "--admin", addr, "--admin-token-file", tf, "--workers", "1")
	defer p.stop(syscall.SIGTERM)
	base := "http://" + addr

	req, _ := http.NewRequest("GET", base+"/v1/stats", nil)
	req.Header.Set("Authorization", "bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf(`"Authorization: bearer TOKEN" (lower-case scheme): got %s, want 200`, resp.Status)
	}

	big := `{"url":"http://127.0.0.1:9/p","key":"` + strings.Repeat("a", 5<<20) + `"}`
	req, _ = http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"too_large"`) {
		t.Errorf("POST /v1/jobs with a 5 MiB body: got %s %s, want 413 with code too_large (api.CodeTooLarge is never produced)", resp.Status, strings.TrimSpace(string(b)))
	}

	req, _ = http.NewRequest("HEAD", base+"/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Errorf("HEAD /v1/backup: got 200 (the handler ran a full backup for a HEAD), want 405")
	}
}
