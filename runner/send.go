package runner

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/h1"
	"github.com/idemrun/idemrun/store"
)

// Doer sends one HTTP request. *http.Client satisfies it.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// NewHTTPClient returns the client the runner uses by default: the
// runner's own HTTP/1.1 transport (package internal/h1), keep-alive, no
// transparent compression (the bytes sent are the stored bytes), at most
// maxConnsPerHost connections per host, busy or idle, and no redirect
// following (a 3xx is returned as the answer). Requests through a proxy
// (HTTP_PROXY and friends) use net/http's Transport.
//
// A request that finds every connection to its host busy waits for one;
// its attempt timeout runs meanwhile, and if it expires there nothing was
// sent (no connection was obtained), so the attempt is retried like any
// attempt that never left.
func NewHTTPClient(maxConnsPerHost int) *http.Client {
	n := max(maxConnsPerHost, 1)
	return clientWith(h1.New(transportOptions(n, n, nil, nil)))
}

// NewNetHTTPClient is NewHTTPClient on net/http's Transport instead of the
// runner's own: the same limits and rules, more CPU per worked job
// (BENCHMARKS.md). It is there for targets that misbehave with the
// runner's transport.
func NewNetHTTPClient(maxConnsPerHost int) *http.Client {
	n := max(maxConnsPerHost, 1)
	return netHTTPClient(n, n, nil, nil)
}

// newHTTPClient is NewHTTPClient with a separate cap on idle connections
// (maxConnsPerHost 0 means no limit), as the runner's default Doer: the
// transport itself, whose Do answers as Client.Do without the client (the
// runner follows no redirects, keeps no cookies, sets no client timeout).
func newHTTPClient(maxConnsPerHost, maxIdlePerHost int, control dialControl, tlsBase *tls.Config) Doer {
	return h1.New(transportOptions(maxConnsPerHost, maxIdlePerHost, control, tlsBase))
}

// transportOptions is the configuration of the runner's own transport:
// proxies as the environment says, the runner's TLS rules (clientTLS).
func transportOptions(maxConnsPerHost, maxIdlePerHost int, control dialControl, tlsBase *tls.Config) h1.Options {
	return h1.Options{
		MaxConnsPerHost: maxConnsPerHost,
		MaxIdlePerHost:  maxIdlePerHost,
		DialControl:     control,
		TLSConfig:       clientTLS(tlsBase),
		Proxy:           http.ProxyFromEnvironment,
	}
}

// newNetHTTPClient is NewNetHTTPClient with a separate cap on idle
// connections (maxConnsPerHost 0 means no limit), as a Doer.
func newNetHTTPClient(maxConnsPerHost, maxIdlePerHost int, control dialControl, tlsBase *tls.Config) Doer {
	return netHTTPClient(maxConnsPerHost, maxIdlePerHost, control, tlsBase)
}

// dialControl is net.Dialer.Control: called with the resolved address of
// every connection before it is made (Config.DialControl).
type dialControl = func(network, address string, c syscall.RawConn) error

func netHTTPClient(maxConnsPerHost, maxIdlePerHost int, control dialControl, tlsBase *tls.Config) *http.Client {
	return clientWith(&http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
			Control:   control,
		}).DialContext,
		TLSClientConfig:       clientTLS(tlsBase),
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          4 * maxIdlePerHost,
		MaxIdleConnsPerHost:   maxIdlePerHost,
		MaxConnsPerHost:       maxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	})
}

// clientTLS is the TLS configuration of the runner's clients: a clone of
// base (Config.TLSConfig: a private CA's roots, a client certificate), or
// a new one, never below TLS 1.2, and offering HTTP/1.1 alone: every
// client of the runner speaks HTTP/1.1, and a base that offers h2 would
// have an h2 server answer HTTP/1.1 bytes as a broken HTTP/2 connection.
func clientTLS(base *tls.Config) *tls.Config {
	cfg := &tls.Config{}
	if base != nil {
		cfg = base.Clone()
	}
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// clientWith is a client over rt that does not follow redirects.
func clientWith(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// BuildRequest builds the HTTP request of a job exactly as stored, with its
// Idempotency-Key header. The body is a non-rewindable reader (GetBody is
// nil), which is what keeps net/http from resending the request on its own
// (Request.isReplayable is false for it). Exported so tests and tools can
// check the request a job sends.
func BuildRequest(ctx context.Context, j *store.Job) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, j.Request.Method, j.Request.URL, nil)
	if err != nil {
		return nil, err
	}
	for _, h := range j.Request.Header {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	format := idemkey.FormatToken
	if j.KeyFormat != "" {
		if f, err := idemkey.ParseFormat(j.KeyFormat); err == nil {
			format = f
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "idemrun")
	}
	key := idemkey.FormatHeader(j.Key, format)
	// The body is never rewindable (GetBody stays nil), which is what keeps
	// net/http from resending the request by itself.
	body := j.Request.Body
	switch {
	case len(body) > 0:
		req.Header.Set(idemkey.HeaderName, key)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	case methodUsuallyLacksBody(j.Request.Method):
		// GET, HEAD and friends: an empty reader of unknown length is
		// sent as no body at all (net/http probes it).
		req.Header.Set(idemkey.HeaderName, key)
		req.Body = io.NopCloser(bytes.NewReader(nil))
	default:
		// An empty POST must go out as "Content-Length: 0", which needs
		// http.NoBody, and net/http counts a NoBody request carrying an
		// Idempotency-Key as replayable. The key is therefore stored under
		// a lower-case map key, which that check does not see; header
		// names are case-insensitive on the wire.
		req.Body = http.NoBody
		req.Header[strings.ToLower(idemkey.HeaderName)] = []string{key}
	}
	req.GetBody = nil
	return req, nil
}

// sendResult is what one attempt observed.
type sendResult struct {
	progress   Progress
	status     int
	header     http.Header
	body       []byte
	truncated  bool
	err        error
	start, end time.Time
}

// progressTracker collects httptrace callbacks; they may run on transport
// goroutines, so it locks.
type progressTracker struct {
	mu sync.Mutex
	p  Progress
}

func (t *progressTracker) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			t.mu.Lock()
			t.p.GotConn, t.p.Reused = true, info.Reused
			t.mu.Unlock()
		},
		WroteHeaders: func() {
			t.mu.Lock()
			t.p.WroteHeaders = true
			t.mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			t.mu.Lock()
			// A failed body write may still have delivered part of the
			// request; WroteHeaders already says bytes left.
			t.p.WroteRequest = info.Err == nil
			t.mu.Unlock()
		},
		GotFirstResponseByte: func() {
			t.mu.Lock()
			t.p.GotFirstByte = true
			t.mu.Unlock()
		},
	}
}

func (t *progressTracker) get() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// drainLimit bounds how much of an over-cap body is read to let the
// connection be reused; beyond it the connection is closed instead.
const drainLimit = 256 << 10

// send performs one attempt: one network send and no hidden ones.
func send(ctx context.Context, doer Doer, j *store.Job, bodyLimit int64, now func() time.Time) sendResult {
	var res sendResult
	res.start = now()
	tr := &progressTracker{}
	ctx = httptrace.WithClientTrace(ctx, tr.trace())
	req, err := BuildRequest(ctx, j)
	if err != nil {
		res.err = err
		res.end = now()
		return res
	}
	resp, err := doer.Do(req)
	res.progress = tr.get()
	if err != nil {
		res.err = err
		if h1.NothingWritten(err) {
			// The transport saw that no byte left; the trace's write hooks
			// fire once the request is in its buffer, not on the wire.
			res.progress.WroteHeaders, res.progress.WroteRequest = false, false
		}
		res.end = now()
		return res
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	res.header = resp.Header
	body, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit+1))
	if int64(len(body)) > bodyLimit {
		body = body[:bodyLimit]
		res.truncated = true
	}
	res.body = body
	if err == nil {
		_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	} else {
		// The status line arrived; a broken body (cut short by the
		// server, or by a shutdown) does not change what the server
		// decided, but what was read is not the whole answer: the result
		// says so, and the error is kept for the record.
		res.truncated = true
		res.err = fmt.Errorf("reading response body: %w", err)
	}
	res.progress = tr.get()
	res.end = now()
	return res
}

// methodUsuallyLacksBody lists the methods net/http sends without a body
// when the body is empty and of unknown length.
func methodUsuallyLacksBody(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions, "PROPFIND", "SEARCH":
		return true
	}
	return false
}
