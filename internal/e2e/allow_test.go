package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// The target allowlist (api.Options.AllowHosts): checked at enqueue, and
// again by the runner at send time after DNS resolution.

// refusedHost fails unless err is an *api.InvalidError about the URL host.
func refusedHost(t *testing.T, what string, err error) {
	t.Helper()
	var ie *api.InvalidError
	if !errors.Is(err, api.ErrInvalid) || !errors.As(err, &ie) || (ie.Field != "url host" && ie.Field != "url") {
		t.Errorf("%s: got %v, want an invalid url or url host error", what, err)
	}
}

// The allowlist admits its hosts and refuses the rest at enqueue, and
// link-local and metadata addresses even when listed.
func TestAllowlistAtEnqueue(t *testing.T) {
	t.Parallel()
	tg := newCountingTarget(t)
	path := filepath.Join(t.TempDir(), "a.db")
	c := openAt(t, path, api.Options{AllowHosts: []string{"127.0.0.1", "169.254.169.254", "[fe80::1]"}})
	defer closeChecked(t, c)
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, api.Request{URL: tg.url()}, api.EnqueueOptions{Key: "allowed", StatusURL: tg.srv.URL + "/s/{key}"}); err != nil {
		t.Errorf("enqueue to the allowlisted 127.0.0.1: %v", err)
	}
	for _, tc := range []struct{ name, url, status string }{
		{"another host", "http://example.com/pay", ""},
		{"a name ending in an allowed IP", "http://127.0.0.1.example.org/pay", ""},
		{"the metadata address, even listed", "http://169.254.169.254/latest/meta-data", ""},
		{"a link-local IPv6 address, even listed", "http://[fe80::1]/x", ""},
		{"the metadata address mapped into IPv6", "http://[::ffff:169.254.169.254]/x", ""},
		{"a status URL on another host", tg.url(), "http://example.com/s/{key}"},
	} {
		_, err := c.Enqueue(ctx, api.Request{URL: tc.url}, api.EnqueueOptions{StatusURL: tc.status})
		refusedHost(t, tc.name, err)
	}
	if st, _ := c.Stats(ctx); totalOf(st) != 1 {
		t.Errorf("jobs stored: got %v, want only the allowed one", st)
	}
}

// "*.example.com" admits subdomains of example.com and nothing that only
// looks like one.
func TestAllowlistWildcard(t *testing.T) {
	t.Parallel()
	c := openAt(t, filepath.Join(t.TempDir(), "w.db"), api.Options{AllowHosts: []string{"*.example.com"}})
	defer closeChecked(t, c)
	ctx := context.Background()
	for i, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://a.example.com/pay", true},
		{"https://A.B.Example.COM/pay", true},
		{"https://a.example.com:8443/pay", true},
		{"https://example.com/pay", false}, // subdomains only, as documented
		{"https://example.com.evil.org/pay", false},
		{"https://a.example.com.evil.org/pay", false},
		{"https://evilexample.com/pay", false},
		{"https://a.example.com@evil.org/pay", false},
		{`https://a.example.com\@evil.org/pay`, false},
		{"https://evil.org#.example.com", false},
		{"https://evil.org/.example.com", false},
		{"https://evil.org?h=.example.com", false},
		{"http://169.254.169.254/latest", false},
		{"http://[fe80::1]/x", false},
	} {
		_, err := c.Enqueue(ctx, api.Request{URL: tc.url}, api.EnqueueOptions{Key: fmt.Sprintf("w-%02d", i)})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: got %v, want it allowed", tc.url, err)
		case !tc.ok:
			refusedHost(t, tc.url, err)
		}
	}
}

// doerFunc is a runner.Doer made of a function.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// A job stored before the allowlist tightened is checked again at send
// time: nothing is sent, and the job fails with the reason.
func TestAllowlistAtSendTime(t *testing.T) {
	t.Parallel()
	tg := newCountingTarget(t)
	path := filepath.Join(t.TempDir(), "s.db")
	c := openAt(t, path, api.Options{})
	enqueue(t, c, tg.url(), []byte(`{"amount":3}`), api.EnqueueOptions{Key: "tightened"})
	// Listed at enqueue only as names; at send time the check resolves them.
	enqueue(t, c, "http://169.254.169.254/latest/meta-data", []byte(`{}`), api.EnqueueOptions{Key: "metadata"})
	enqueue(t, c, "http://[fe80::1]/x", []byte(`{}`), api.EnqueueOptions{Key: "link-local"})
	closeChecked(t, c)

	c2 := openAt(t, path, api.Options{AllowHosts: []string{"localhost.invalid", "169.254.169.254", "fe80::1"}})
	defer closeChecked(t, c2)
	var sent atomic.Int64
	cfg := baseConfig()
	cfg.Doer = doerFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return nil, fmt.Errorf("test doer: %s must not be sent", r.URL)
	})
	runUntilIdle(t, c2, cfg)
	if n := sent.Load(); n != 0 {
		t.Errorf("doer was asked to send %d requests, want 0", n)
	}
	if n := tg.n.Load(); n != 0 {
		t.Errorf("target got %d requests, want 0", n)
	}
	for key, why := range map[string]string{"tightened": "not allowed", "metadata": "link-local or metadata", "link-local": "link-local or metadata"} {
		j := jobByKey(t, c2, key)
		atts := eventsOf(j, store.EventAttempt)
		if j.State != store.StateFailed || j.MayHaveEffect || !strings.Contains(j.Reason, "allowlist") || !strings.Contains(j.Reason, why) {
			t.Errorf("job %s: got %s, want failed, no effect, with an allowlist reason saying %q", key, describe(j), why)
		}
		if len(atts) != 1 || !strings.HasPrefix(atts[0].Error, "not sent") {
			t.Errorf("job %s: attempts %+v, want one attempt recorded as not sent", key, atts)
		}
	}

	// Control: a host on the allowlist at both times is sent.
	c3 := openAt(t, filepath.Join(t.TempDir(), "ok.db"), api.Options{AllowHosts: []string{"127.0.0.1"}})
	defer closeChecked(t, c3)
	enqueue(t, c3, tg.url(), []byte(`{"amount":4}`), api.EnqueueOptions{Key: "allowed"})
	runUntilIdle(t, c3, baseConfig())
	if j := jobByKey(t, c3, "allowed"); j.State != store.StateSucceeded {
		t.Errorf("allowed job: got %s, want succeeded", describe(j))
	}
	if n := tg.n.Load(); n != 1 {
		t.Errorf("target got %d requests, want 1 (the allowed job)", n)
	}
}
