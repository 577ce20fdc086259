// Package h1 is an HTTP/1.1 client transport that sends each request
// exactly once.
//
// It exists because net/http's Transport runs two goroutines per
// connection (a reader and a writer) and hands every request and response
// between them and the caller, which costs CPU per request
// (BENCHMARKS.md), and because it resends on its own a request it thinks
// replayable. Here the caller's goroutine writes the request and reads the
// response, and nothing is ever resent. The wire format is net/http's own:
// Request.Write and ReadResponse. Requests through a proxy go to a
// net/http Transport.
package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/internal/httpsyntax"
)

// Transport is an HTTP/1.1 round tripper: one request at a time per
// connection, connections kept per host and reused only after an exchange
// that ended cleanly, nothing ever sent twice (it has no retry path).
//
// A connection goes back to the idle list only when the response body was
// read to its end (as framed by Content-Length or chunking), neither side
// asked to close, and the request's context did not fire. Before an idle
// connection is used again it is checked without blocking: a connection
// the server closed, or one with unexpected bytes waiting (the server
// spoke out of turn), is dropped and a new one dialed, so a response is
// never read from a connection that is out of step.
//
// Its methods are safe for concurrent use.
type Transport struct {
	dialer      net.Dialer
	tlsConfig   *tls.Config
	tlsTimeout  time.Duration
	maxConns    int // per host, busy or idle; 0 means no limit
	maxIdle     int // idle connections kept per host
	idleTimeout time.Duration
	proxy       func(*http.Request) (*url.URL, error)
	viaProxy    *http.Transport
	client      *http.Client // for what Do leaves to http.Client

	mu    sync.Mutex
	hosts map[hostKey]*hostConns
	sweep *time.Timer // armed while connections are idle
}

// Options configures a Transport. The zero value is a transport with no
// connection limit that keeps no idle connection and uses no proxy.
type Options struct {
	// MaxConnsPerHost caps the connections to one host (scheme, host and
	// port), busy or idle; a request that finds them all busy waits for
	// one, or for its context to end. 0 means no limit.
	MaxConnsPerHost int
	// MaxIdlePerHost is how many idle connections are kept per host.
	MaxIdlePerHost int
	// IdleTimeout is how long a connection may sit idle before it is
	// closed. 0 means 90 seconds.
	IdleTimeout time.Duration
	// DialControl, when set, is net.Dialer.Control for every connection
	// dialed, proxy connections included: it sees the resolved address
	// before the connection is made, and an error refuses it.
	DialControl func(network, address string, c syscall.RawConn) error
	// TLSConfig is the configuration https connections start from; it is
	// cloned by New. NextProtos is replaced by HTTP/1.1 alone, and
	// ServerName, when empty, is the request's host. Nil means
	// crypto/tls's defaults.
	TLSConfig *tls.Config
	// Proxy, when set, picks the proxy a request goes through, as
	// http.Transport.Proxy does (http.ProxyFromEnvironment, say); a nil
	// URL means none. Proxied requests are sent by a net/http Transport
	// configured from the same options.
	Proxy func(*http.Request) (*url.URL, error)
}

// hostKey names a host's connections: scheme and host:port.
type hostKey struct{ scheme, addr string }

// keyOf is u's hostKey; the common URL with an explicit port costs no
// allocation.
func keyOf(u *url.URL) hostKey {
	if u.Port() != "" {
		return hostKey{u.Scheme, u.Host}
	}
	return hostKey{u.Scheme, hostPort(u)}
}

// hostConns is one host's connections.
type hostConns struct {
	key   hostKey
	slots chan struct{} // one per connection in use or being dialed; nil without a limit
	idle  []*conn       // most recently used last
	users int           // round trips holding this entry (under Transport.mu)
}

// New returns a Transport configured by o.
func New(o Options) *Transport {
	tlsConfig := &tls.Config{}
	if o.TLSConfig != nil {
		tlsConfig = o.TLSConfig.Clone()
	}
	// Only HTTP/1.1 is spoken, on the direct and the proxied path alike: a
	// server offered h2 would answer HTTP/1.1 bytes as a broken HTTP/2
	// connection.
	tlsConfig.NextProtos = []string{"http/1.1"}
	idleTimeout := o.IdleTimeout
	if idleTimeout <= 0 {
		idleTimeout = 90 * time.Second
	}
	t := &Transport{
		dialer:      net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: o.DialControl},
		tlsConfig:   tlsConfig,
		tlsTimeout:  10 * time.Second,
		maxConns:    o.MaxConnsPerHost,
		maxIdle:     o.MaxIdlePerHost,
		idleTimeout: idleTimeout,
		proxy:       o.Proxy,
		viaProxy: &http.Transport{
			Proxy:               o.Proxy,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: o.DialControl}).DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: o.MaxIdlePerHost,
			MaxConnsPerHost:     o.MaxConnsPerHost,
			IdleConnTimeout:     idleTimeout,
			DisableCompression:  true,
		},
		hosts: map[hostKey]*hostConns{},
	}
	t.client = &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return t
}

// RoundTrip sends req once and returns the response; its body must be
// closed, which frees the connection.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkRequest(req); err != nil {
		closeReqBody(req)
		return nil, err
	}
	if t.proxy != nil {
		pu, err := t.proxy(req)
		if err != nil {
			closeReqBody(req)
			return nil, err
		}
		if pu != nil {
			// net/http refuses an invalid Host to a proxy, but its writer
			// and reader race to report it (sometimes a closed connection
			// instead); refusing it here gives the one answer every time.
			if req.Host != "" && !httpsyntax.ValidHostHeader(req.Host) {
				closeReqBody(req)
				return nil, errors.New("http: invalid Host header")
			}
			return t.viaProxy.RoundTrip(req)
		}
	}
	ctx := req.Context()
	h := t.host(keyOf(req.URL))
	if h.slots != nil {
		select {
		case h.slots <- struct{}{}:
		case <-ctx.Done():
			t.leave(h)
			closeReqBody(req)
			return nil, ctx.Err()
		}
	}
	release := func() {
		if h.slots != nil {
			<-h.slots
		}
		t.leave(h)
	}
	c, reused, idle, err := t.getConn(ctx, req, h)
	if err != nil {
		release()
		closeReqBody(req)
		return nil, withCtxErr(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		// Ended while the connection was being made: nothing was sent,
		// and the connection is as good as before.
		t.putIdle(h, c)
		release()
		closeReqBody(req)
		return nil, err
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: c.c, Reused: reused, WasIdle: reused, IdleTime: idle})
	}
	sent := c.out.n
	resp, stop, err := exchange(ctx, req, c, trace)
	if err != nil {
		c.close()
		release()
		if c.out.n == sent {
			// Not one byte of the request reached the socket (over TLS:
			// not one whole record), whatever the trace hooks said: they
			// fire when bytes are in the write buffer.
			err = nothingWrittenError{err}
		}
		return nil, err
	}
	b := &body{t: t, h: h, c: c, rc: resp.Body, stop: stop, release: release, ctx: ctx,
		reusable: !resp.Close && !req.Close}
	if tc, ok := c.c.(*tls.Conn); ok {
		st := tc.ConnectionState()
		resp.TLS = &st
	}
	if resp.Body == http.NoBody {
		b.eof.Store(true)
	}
	resp.Body = b
	return resp, nil
}

// exchange writes req on c and reads the response head. When the request's
// context ends (its deadline or a cancellation), blocked I/O on the
// connection is woken by a deadline in the past, after ctx.Err() is set, so
// the error returned is the context's; stop ends that watch and reports
// whether it never fired.
func exchange(ctx context.Context, req *http.Request, c *conn, trace *httptrace.ClientTrace) (*http.Response, func() bool, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, func() bool, error) {
		stop()
		return nil, nil, withCtxErr(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		closeReqBody(req)
		return fail(err)
	}
	if req.ContentLength < 0 || req.ContentLength > concurrentBodyMin {
		return exchangeLarge(ctx, req, c, trace, stop)
	}
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		// A server may answer before it has read the whole request (a 413
		// for a body it will not take) and close: its answer is what
		// the caller gets, not the broken pipe.
		if ctx.Err() == nil {
			if resp, rerr := readFinal(c, req, trace); rerr == nil {
				resp.Close = true
				return resp, stop, nil
			}
		}
		return fail(err)
	}
	resp, err := readFinal(c, req, trace)
	if err != nil {
		return fail(err)
	}
	return resp, stop, nil
}

// concurrentBodyMin is the body size above which the request is written
// while the response is read. A smaller request fits the socket's send
// buffer, so its write does not wait for the server to read; a larger one
// can block on a server that answers before reading it all (a 413) and
// stops reading, and that answer must not be lost to the write's timeout.
const concurrentBodyMin = 32 << 10

// earlyAnswerGrace is how long an answer that arrived while the request
// was still being written waits for the write to end by itself before it
// is cut off (and the connection closed).
const earlyAnswerGrace = 50 * time.Millisecond

// exchangeLarge is exchange for a large body: the caller's goroutine reads
// the response head while a second one writes the request. An answer that
// comes before the request is written is the response, as net/http takes
// it; the write is then cut off and the connection closed.
func exchangeLarge(ctx context.Context, req *http.Request, c *conn, trace *httptrace.ClientTrace, stop func() bool) (*http.Response, func() bool, error) {
	wrote := make(chan error, 1)
	go func() {
		err := req.Write(c.bw)
		if err == nil {
			err = c.bw.Flush()
		}
		wrote <- err
	}()
	resp, rerr := readFinal(c, req, trace)
	cut := func() error {
		_ = c.raw.SetWriteDeadline(aLongTimeAgo) // nothing more is sent
		return <-wrote
	}
	var werr error
	select {
	case werr = <-wrote:
	default:
		if rerr != nil {
			// No answer to keep: a write to a server that stopped
			// reading would otherwise last until the deadline, or
			// forever without one. The read's error is the cause.
			_ = cut()
			break
		}
		// An answer, and the writer has not reported: it is finishing a
		// request the server read whole, or blocked on a server that
		// answered early and stopped reading. A moment tells which.
		grace := time.NewTimer(earlyAnswerGrace)
		select {
		case werr = <-wrote:
		case <-grace.C:
			if werr = cut(); werr == nil {
				werr = errors.New("request write cut off by an early answer")
			}
		}
		grace.Stop()
	}
	if rerr == nil {
		if werr != nil {
			resp.Close = true // the request was not all written: out of step
		}
		return resp, stop, nil
	}
	stop()
	if werr != nil && ctx.Err() == nil {
		return nil, nil, werr // the write's error says why the read failed
	}
	return nil, nil, withCtxErr(ctx, rerr)
}

// readFinal reads the response head to req, skipping interim 1xx
// responses, within maxHeaderBytes.
func readFinal(c *conn, req *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	c.in.n = maxHeaderBytes - int64(c.br.Buffered())
	defer func() { c.in.n = -1 }()
	first := true
	for {
		if _, err := c.br.Peek(1); err != nil {
			return nil, err
		}
		if first && trace != nil && trace.GotFirstResponseByte != nil {
			trace.GotFirstResponseByte()
		}
		first = false
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		// 1xx responses other than 101 are interim: the final one follows.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Close = true // the connection no longer speaks HTTP/1.1
		}
		return resp, nil
	}
}

// nothingWrittenError is an exchange that failed before any byte of the
// request was written to the connection: the request was not sent.
type nothingWrittenError struct{ error }

func (e nothingWrittenError) Unwrap() error { return e.error }

// NothingWritten reports whether err, from RoundTrip or Do, says that not
// one byte of the request reached the connection (over TLS: not one whole
// record), so the server cannot have seen it, whatever the httptrace
// hooks reported: WroteHeaders and WroteRequest fire once the request is
// in the write buffer. False says nothing either way; a proxied request's
// error is always false.
func NothingWritten(err error) bool {
	_, ok := errors.AsType[nothingWrittenError](err)
	return ok
}

// withCtxErr returns err as the context's error when the context has
// ended (the I/O error it caused kept in the message), so callers see
// context.Canceled or context.DeadlineExceeded as net/http reports them.
func withCtxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w (%v)", cerr, err)
}

// body is a response body that gives its connection back when it is
// closed after being read to its end, and closes it otherwise.
type body struct {
	t        *Transport
	h        *hostConns
	c        *conn
	rc       io.ReadCloser
	stop     func() bool
	release  func()
	ctx      context.Context
	reusable bool

	eof    atomic.Bool
	closed atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("http: read on closed response body")
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	} else if err != nil {
		err = withCtxErr(b.ctx, err)
	}
	return n, err
}

// Close frees the connection: back to the idle list after a clean end,
// closed otherwise (which also wakes a Read blocked on it).
func (b *body) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	untouched := b.stop() // false when the context's watch already fired
	reuse := b.eof.Load() && b.reusable && untouched && b.c.br.Buffered() == 0
	if !reuse {
		b.c.close()
	}
	_ = b.rc.Close()
	if reuse {
		b.t.putIdle(b.h, b.c)
	}
	b.release()
	return nil
}

// host returns the connections of key, creating the entry, and counts the
// caller as its user until leave.
func (t *Transport) host(key hostKey) *hostConns {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[key]
	if h == nil {
		h = &hostConns{key: key}
		if t.maxConns > 0 {
			h.slots = make(chan struct{}, t.maxConns)
		}
		t.hosts[key] = h
	}
	h.users++
	return h
}

// leave ends a round trip's use of h. An entry with no users and no idle
// connections is dropped, so the map does not keep every host ever seen.
func (t *Transport) leave(h *hostConns) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h.users--
	if h.users == 0 && len(h.idle) == 0 {
		delete(t.hosts, h.key)
	}
}

// getConn returns a live idle connection to req's host, or dials one.
func (t *Transport) getConn(ctx context.Context, req *http.Request, h *hostConns) (*conn, bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, 0, err
	}
	for {
		t.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c := h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		t.mu.Unlock()
		idle := time.Since(c.idleAt)
		if idle <= t.idleTimeout && idleConnAlive(c.raw) && c.quiet() {
			return c, true, idle, nil
		}
		c.close()
	}
	c, err := t.dial(ctx, req)
	return c, false, 0, err
}

// putIdle keeps c for the next request to its host, unless the host
// already keeps enough. Idle connections are closed after idleTimeout by
// a sweep that runs while any are kept (as net/http's IdleConnTimeout): a
// connection the server closed must not sit half-closed forever.
func (t *Transport) putIdle(h *hostConns, c *conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if len(h.idle) < t.maxIdle {
		h.idle = append(h.idle, c)
		c = nil
		if t.sweep == nil {
			t.sweep = time.AfterFunc(t.idleTimeout, t.sweepIdle)
		}
	}
	t.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// sweepIdle closes the connections idle longer than idleTimeout, drops
// host entries left empty, and runs again while connections are idle.
func (t *Transport) sweepIdle() {
	now := time.Now()
	var stale []*conn
	t.mu.Lock()
	left := false
	for key, h := range t.hosts {
		kept := h.idle[:0]
		for _, c := range h.idle {
			if now.Sub(c.idleAt) >= t.idleTimeout {
				stale = append(stale, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(h.idle[len(kept):])
		h.idle = kept
		if len(kept) > 0 {
			left = true
		} else if h.users == 0 {
			delete(t.hosts, key)
		}
	}
	t.sweep = nil
	if left {
		t.sweep = time.AfterFunc(t.idleTimeout/2, t.sweepIdle)
	}
	t.mu.Unlock()
	for _, c := range stale {
		c.close()
	}
}

// CloseIdleConnections closes every idle connection, proxied ones too.
func (t *Transport) CloseIdleConnections() {
	var idle []*conn
	t.mu.Lock()
	for key, h := range t.hosts {
		idle = append(idle, h.idle...)
		clear(h.idle)
		h.idle = h.idle[:0]
		if h.users == 0 {
			delete(t.hosts, key)
		}
	}
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	t.viaProxy.CloseIdleConnections()
}

// hostPort is u's host with its port, the scheme's default if none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func closeReqBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// checkRequest refuses, before any connection, what net/http's Transport
// refuses, with the same messages (callers that classify errors by
// net/http's words need no second list): a missing
// URL or header map, a scheme other than http and https, no host, a method
// or header that is not a valid token or value.
func checkRequest(req *http.Request) error {
	switch {
	case req.URL == nil:
		return errors.New("http: nil Request.URL")
	case req.Header == nil:
		return errors.New("http: nil Request.Header")
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("unsupported protocol scheme %q", req.URL.Scheme)
	case req.URL.Host == "":
		return errors.New("http: no Host in request URL")
	case req.Method != "" && !httpsyntax.IsToken(req.Method):
		return fmt.Errorf("net/http: invalid method %q", req.Method)
	}
	for k, vs := range req.Header {
		if !httpsyntax.IsToken(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpsyntax.ValidHeaderValue(v) {
				// The value is not echoed: it may be a secret.
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}
