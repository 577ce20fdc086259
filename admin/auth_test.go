package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// token is the admin token of tokenServer.
const token = "3f9c1e7a52d84b06a1c9e5f27d3b8a40"

// tokenServer serves the admin API with token on a fake clock, its log
// kept.
func tokenServer(t *testing.T) (*httptest.Server, *fakeClock, *syncBuffer) {
	t.Helper()
	c := apitest.OpenClient(t, api.Options{})
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	logs := &syncBuffer{}
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: token, Now: clock.now, Logger: slog.New(slog.NewTextHandler(logs, nil))}))
	t.Cleanup(srv.Close)
	return srv, clock, logs
}

// Wrong tokens are logged (the client's address, never the token) and
// slowed per address: after admin.AuthBurst failures an address is
// answered 429 with Retry-After, whatever token it sends, until its bucket
// refills (one attempt per admin.AuthRefill); other addresses are not
// slowed. Before, ~15k guesses a second went through unlogged (found by a
// probe).
func TestAuthThrottlesWrongTokens(t *testing.T) {
	t.Parallel()
	const guess = "guess-0123456789abcdef-guess"
	srv, clock, logs := tokenServer(t)
	url := srv.URL + "/v1/stats"
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")

	for i := range admin.AuthBurst {
		if resp := get(t, a, url, guess); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: got %s, want 401", i+1, resp.Status)
		}
	}
	for _, tok := range []string{guess, token} {
		resp := get(t, a, url, tok)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("after %d wrong tokens, token %q: got %s Retry-After %q, want 429 Retry-After 1", admin.AuthBurst, tok, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	// No token is no guess: refused as ever, and not counted.
	if resp := get(t, a, url, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after %d wrong tokens, no token: got %s, want 401", admin.AuthBurst, resp.Status)
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
	// One line per failure let through (the request without a token
	// included), one when throttling starts: not one per refused guess.
	if n := strings.Count(out, "\n"); n > admin.AuthBurst+5 {
		t.Errorf("%d log lines for %d failures, want at most %d:\n%s", n, admin.AuthBurst+5, admin.AuthBurst+5, out)
	}
}

// Requests without a token (a scraper, a health check) are refused and
// logged but are not guesses: however many come from an address, the
// right token from it is let through.
func TestAuthNoTokenIsNoGuess(t *testing.T) {
	t.Parallel()
	srv, _, logs := tokenServer(t)
	a := clientFrom("127.0.0.1")
	for i := range 3 * admin.AuthBurst {
		if resp := get(t, a, srv.URL+"/metrics", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d without a token: got %s, want 401", i+1, resp.Status)
		}
	}
	if resp := get(t, a, srv.URL+"/v1/stats", token); resp.StatusCode != http.StatusOK {
		t.Errorf("the right token after %d requests without one: got %s, want 200", 3*admin.AuthBurst, resp.Status)
	}
	if !strings.Contains(logs.String(), "no bearer token") {
		t.Errorf("requests without a token are not logged:\n%s", logs.String())
	}
}

// uiEcho is a dashboard stand-in that answers what the token check told
// it: "session csrf=TOKEN" or "csrf=TOKEN".
var uiEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	a := admin.UIAuthFrom(r.Context())
	if a.Session {
		fmt.Fprint(w, "session ")
	}
	fmt.Fprintf(w, "csrf=%s", a.CSRF)
})

// uiClient sends form posts and cookies by hand, and shows redirects.
type uiClient struct {
	t       *testing.T
	c       *http.Client
	base    string
	cookies map[string]string
}

func (u *uiClient) do(method, path string, form url.Values) (*http.Response, string) {
	u.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range u.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := u.c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 {
			delete(u.cookies, c.Name)
		} else {
			u.cookies[c.Name] = c.Value
		}
	}
	return resp, string(b)
}

// The dashboard's login: a browser without a session is sent to the form;
// the form needs its own CSRF token and the admin token; a login sets an
// HttpOnly, SameSite=Strict cookie good for the dashboard's paths only,
// whose POSTs need the session's CSRF token; logout and expiry end it;
// wrong tokens on the form take from the same budget as bearer tokens.
func TestAuthDashboardSession(t *testing.T) {
	t.Parallel()
	const token = "3f9c1e7a52d84b06a1c9e5f27d3b8a40"
	c := apitest.OpenClient(t, api.Options{})
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: token, Now: clock.now, UI: uiEcho, SessionTTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	hc := clientFrom("127.0.0.1")
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	u := &uiClient{t: t, c: hc, base: srv.URL, cookies: map[string]string{}}

	resp, _ := u.do("GET", "/ui/jobs?state=failed", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Fjobs%3Fstate%3Dfailed" {
		t.Fatalf("GET without a session: %s Location %q, want 303 to the login form", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := u.do("POST", "/ui/jobs/x/retry", url.Values{}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST without a session: %s, want 401", resp.Status)
	}
	resp, body := u.do("GET", "/ui/login", nil)
	loginCSRF := strings.TrimPrefix(body, "csrf=")
	if resp.StatusCode != 200 || loginCSRF == "" || u.cookies["idemrun_login"] != loginCSRF {
		t.Fatalf("login form: %s %q, cookies %v; want the form's CSRF token in the page and its cookie", resp.Status, body, u.cookies)
	}
	login := func(csrf, tok, next string) string {
		t.Helper()
		resp, _ := u.do("POST", "/ui/login", url.Values{"csrf": {csrf}, "token": {tok}, "next": {next}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %s, want 303", resp.Status)
		}
		return resp.Header.Get("Location")
	}
	if loc := login("forged", token, "/ui/"); !strings.Contains(loc, "expired=1") || u.cookies["idemrun_session"] != "" {
		t.Fatalf("login with a wrong form token went to %q, cookies %v", loc, u.cookies)
	}
	if loc := login(loginCSRF, "wrong-token-0123456789", "/ui/"); !strings.Contains(loc, "failed=1") || u.cookies["idemrun_session"] != "" {
		t.Fatalf("login with a wrong token went to %q, cookies %v", loc, u.cookies)
	}
	resp, _ = u.do("POST", "/ui/login", url.Values{"csrf": {loginCSRF}, "token": {token}, "next": {"//evil.example/ui/"}})
	var sc *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "idemrun_session" {
			sc = c
		}
	}
	if resp.Header.Get("Location") != "/ui/" || sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/ui/" || sc.MaxAge != 3600 {
		t.Fatalf("login: Location %q, session cookie %+v; want /ui/ (not another site) and an HttpOnly SameSite=Strict cookie for /ui/ lasting the TTL", resp.Header.Get("Location"), sc)
	}
	resp, body = u.do("GET", "/ui/jobs", nil)
	sessCSRF := strings.TrimPrefix(body, "session csrf=")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "session csrf=") || sessCSRF == loginCSRF || len(sessCSRF) < 32 {
		t.Fatalf("GET with the session: %s %q", resp.Status, body)
	}
	if resp, _ := u.do("GET", "/v1/stats", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the admin API with only the session cookie: %s, want 401", resp.Status)
	}
	for _, csrf := range []string{"", "forged", loginCSRF} {
		if resp, body := u.do("POST", "/ui/jobs/x/retry", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("POST with csrf %q: %s %q, want 403 naming the CSRF token", csrf, resp.Status, body)
		}
	}
	if resp, body := u.do("POST", "/ui/jobs/x/retry", url.Values{"csrf": {sessCSRF}}); resp.StatusCode != 200 || !strings.HasPrefix(body, "session") {
		t.Fatalf("POST with the session's CSRF token: %s %q", resp.Status, body)
	}
	if resp, _ := u.do("POST", "/ui/logout", url.Values{"csrf": {sessCSRF}}); resp.StatusCode != http.StatusSeeOther || u.cookies["idemrun_session"] != "" {
		t.Fatalf("logout: %s, cookies %v", resp.Status, u.cookies)
	}

	// A session id kept after logout, or after its TTL, is no session.
	old := sc.Value
	u.cookies["idemrun_session"] = old
	if resp, _ := u.do("GET", "/ui/jobs", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a logged-out session: %s, want 303 to the login form", resp.Status)
	}
	u.do("GET", "/ui/login", nil)
	login(u.cookies["idemrun_login"], token, "/ui/")
	if resp, _ := u.do("GET", "/ui/jobs", nil); resp.StatusCode != 200 {
		t.Fatalf("a new session: %s", resp.Status)
	}
	clock.add(time.Hour)
	if resp, _ := u.do("GET", "/ui/jobs", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session past its TTL: %s, want 303 to the login form", resp.Status)
	}

	// Wrong tokens on the form are throttled like bearer tokens.
	u.do("GET", "/ui/login", nil)
	csrf := u.cookies["idemrun_login"]
	for i := range admin.AuthBurst {
		if loc := login(csrf, "wrong-token-0123456789", "/ui/"); !strings.Contains(loc, "failed=1") {
			t.Fatalf("wrong login %d went to %q", i+1, loc)
		}
	}
	if loc := login(csrf, token, "/ui/"); !strings.Contains(loc, "wait=1") || u.cookies["idemrun_session"] != "" {
		t.Fatalf("after %d wrong logins the right token went to %q, cookies %v; want a wait", admin.AuthBurst, loc, u.cookies)
	}
	if resp := get(t, clientFrom("127.0.0.1"), srv.URL+"/v1/stats", token); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("and the bearer token from that address: %s, want 429", resp.Status)
	}
}
