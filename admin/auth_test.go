package admin_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
)

// fakeClock is an Options.Now that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer is a log sink the server's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// clientFrom returns an HTTP client whose connections come from the
// loopback address ip.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Wrong tokens are logged (the client's address, never the token) and
// slowed per address: after admin.AuthBurst failures an address is
// answered 429 with Retry-After, whatever token it sends, until its bucket
// refills (one attempt per admin.AuthRefill); other addresses are not
// slowed. Before, ~15k guesses a second went through unlogged (found by a
// probe).
func TestAuthThrottlesWrongTokens(t *testing.T) {
	t.Parallel()
	const token = "3f9c1e7a52d84b06a1c9e5f27d3b8a40"
	const guess = "guess-0123456789abcdef-guess"
	c := apitest.OpenClient(t, api.Options{})
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var logs syncBuffer
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: token, Now: clock.now, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/stats"
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range admin.AuthBurst {
		if resp := get(t, a, url, guess); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: got %s, want 401", i+1, resp.Status)
		}
	}
	for _, tok := range []string{guess, "", token} {
		resp := get(t, a, url, tok)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("after %d wrong tokens, token %q: got %s Retry-After %q, want 429 Retry-After 1", admin.AuthBurst, tok, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	if resp := get(t, b, url, token); resp.StatusCode != http.StatusOK {
		t.Errorf("another address with the token: got %s, want 200", resp.Status)
	}
	clock.add(admin.AuthRefill)
	if resp := get(t, a, url, guess); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("one refill later, a wrong token: got %s, want 401", resp.Status)
	}
	if resp := get(t, a, url, guess); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("and the next: got %s, want 429", resp.Status)
	}
	clock.add(time.Minute)
	if resp := get(t, a, url, token); resp.StatusCode != http.StatusOK {
		t.Errorf("a minute later with the token: got %s, want 200", resp.Status)
	}

	out := logs.String()
	if strings.Contains(out, guess) || strings.Contains(out, token) {
		t.Errorf("the log shows a token:\n%s", out)
	}
	if !strings.Contains(out, "client=127.0.0.1") || !strings.Contains(out, "wrong bearer token") || !strings.Contains(out, "throttl") {
		t.Errorf("the log does not name the client, the failure and the throttling:\n%s", out)
	}
	// One line per failure let through, one when throttling starts: not one
	// per refused guess.
	if n := strings.Count(out, "\n"); n > admin.AuthBurst+4 {
		t.Errorf("%d log lines for %d failures, want at most %d:\n%s", n, admin.AuthBurst+4, admin.AuthBurst+4, out)
	}
}
