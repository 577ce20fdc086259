package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
)

// countingServer is an httptest server that counts the connections it
// accepted and the requests it read, and signals each request and each
// connection it closed.
type countingServer struct {
	*httptest.Server
	conns, reqs atomic.Int64
	arrived     chan struct{} // one per request, before the handler runs
	closed      chan struct{} // one per connection closed
}

// waitFor waits for a signal on ch, failing the test after 5 seconds.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
	}
}

// newTransport is New(o), its idle connections closed when the test ends.
func newTransport(t *testing.T, o Options) *Transport {
	tr := New(o)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func newCountingServer(t *testing.T, h http.HandlerFunc, configure ...func(*http.Server)) *countingServer {
	t.Helper()
	cs := &countingServer{arrived: make(chan struct{}, 64), closed: make(chan struct{}, 64)}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.reqs.Add(1)
		cs.arrived <- struct{}{}
		h(w, r)
	}))
	cs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			cs.conns.Add(1)
		case http.StateClosed:
			cs.closed <- struct{}{}
		}
	}
	for _, f := range configure {
		f(cs.Config)
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

// roundTrip sends one POST through tr and returns status and body.
func roundTrip(t *testing.T, tr *Transport, ctx context.Context, target string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// sendN sends n POSTs in a row through tr and fails the test unless each
// gets 201 with wantBody.
func sendN(t *testing.T, tr *Transport, target string, n int, wantBody string) {
	t.Helper()
	for i := range n {
		if code, body, err := roundTrip(t, tr, context.Background(), target); err != nil || code != 201 || body != wantBody {
			t.Fatalf("request %d: %d %q %v; want 201 %q", i, code, body, err, wantBody)
		}
	}
}

// Sequential requests to one host share one connection.
func TestTransportReusesConnections(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"p_1"}`)
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	sendN(t, tr, srv.URL, 20, `{"id":"p_1"}`)
	if c, r := srv.conns.Load(), srv.reqs.Load(); c != 1 || r != 20 {
		t.Errorf("server saw %d connections, %d requests; want 1 and 20", c, r)
	}
}

// A connection the server closed while it sat idle is noticed before use:
// the next request goes out once, on a new connection, and succeeds.
func TestTransportSkipsConnectionsClosedWhileIdle(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}, func(s *http.Server) {
		s.IdleTimeout = 20 * time.Millisecond // the server drops idle connections
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	for i := range 3 {
		if code, _, err := roundTrip(t, tr, context.Background(), srv.URL); err != nil || code != 201 {
			t.Fatalf("request %d: %d %v; want 201", i, code, err)
		}
		waitFor(t, srv.closed, "close of the idle connection by the server")
	}
	if c, r := srv.conns.Load(), srv.reqs.Load(); c != 3 || r != 3 {
		t.Errorf("server saw %d connections, %d requests; want 3 and 3", c, r)
	}
}

// A server that answers before reading the whole request and closes (a
// 413 for a body too large) gives the caller its answer, not the broken
// pipe of the unfinished upload.
func TestTransportEarlyAnswer(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 2, MaxIdlePerHost: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, io.NopCloser(bytes.NewReader(make([]byte, 32<<20))))
	req.ContentLength = 32 << 20
	resp, err := tr.client.Do(req)
	if err != nil {
		t.Fatalf("got %v; want the server's 413", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d; want 413", resp.StatusCode)
	}
}

// A response head larger than 10 MiB is refused, not read without end.
func TestTransportCapsResponseHeaders(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1<<16) + "\r\n"
		for range 11 << 20 / len(line) {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	tr := newTransport(t, Options{MaxConnsPerHost: 2, MaxIdlePerHost: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = roundTrip(t, tr, ctx, "http://"+ln.Addr().String()+"/")
	if !errors.Is(err, errHeaderTooLarge) {
		t.Errorf("got %v; want errHeaderTooLarge", err)
	}
}

// A body closed before its end takes its connection with it; the next
// request dials anew.
func TestTransportClosesConnectionOfUnreadBody(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 64<<10))
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadFull(resp.Body, make([]byte, 10))
	resp.Body.Close()
	if code, _, err := roundTrip(t, tr, context.Background(), srv.URL); err != nil || code != 200 {
		t.Fatalf("second request: %d %v", code, err)
	}
	if c := srv.conns.Load(); c != 2 {
		t.Errorf("server saw %d connections; want 2 (the half-read one not reused)", c)
	}
}

// With every connection to a host busy, a request waits; if its context
// ends first it fails without sending anything.
func TestTransportSlotWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
	})
	t.Cleanup(func() { close(release) })
	tr := newTransport(t, Options{MaxConnsPerHost: 1, MaxIdlePerHost: 1})
	go func() { _, _, _ = roundTrip(t, tr, context.Background(), srv.URL) }()
	waitFor(t, srv.arrived, "first request at the server")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	gotConn := false
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConn = true }})
	_, _, err := roundTrip(t, tr, ctx, srv.URL)
	if !errors.Is(err, context.DeadlineExceeded) || gotConn {
		t.Fatalf("request over the cap: err %v, got a connection %v; want DeadlineExceeded before any connection", err, gotConn)
	}
	if r, c := srv.reqs.Load(), srv.conns.Load(); r != 1 || c != 1 {
		t.Errorf("server saw %d requests on %d connections; want 1 and 1", r, c)
	}
}

// A request whose context ends once it has a connection, before a byte of
// it is written, fails with an error NothingWritten recognizes; one that
// reached the server and got no answer does not.
func TestNothingWritten(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		panic(http.ErrAbortHandler) // the request arrived; no answer
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { cancel() }})
	if _, _, err := roundTrip(t, tr, stopped, srv.URL); !errors.Is(err, context.Canceled) || !NothingWritten(err) || srv.reqs.Load() != 0 {
		t.Errorf("stopped with a connection in hand: err %v, NothingWritten %v, %d requests at the server; want Canceled, true, 0", err, NothingWritten(err), srv.reqs.Load())
	}
	if _, _, err := roundTrip(t, tr, context.Background(), srv.URL); err == nil || NothingWritten(err) || srv.reqs.Load() != 1 {
		t.Errorf("unanswered: err %v, NothingWritten %v, %d requests at the server; want an error, false, 1", err, NothingWritten(err), srv.reqs.Load())
	}
}

// Interim 1xx responses are skipped; the final response is returned.
func TestTransportSkipsInterimResponses(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "done")
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	sendN(t, tr, srv.URL, 2, "done")
	if c := srv.conns.Load(); c != 1 {
		t.Errorf("server saw %d connections; want 1", c)
	}
}

// "Connection: close" from the server ends the connection after its
// response; nothing is reused.
func TestTransportHonorsConnectionClose(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusCreated)
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	sendN(t, tr, srv.URL, 3, "")
	if c := srv.conns.Load(); c != 3 {
		t.Errorf("server saw %d connections; want 3", c)
	}
}

// The trace hooks callers rely on to tell how far a request got fire in
// order, with Reused on a kept connection.
func TestTransportTraceHooks(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	for i, wantReused := range []bool{false, true} {
		var events []string
		reused := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn:              func(info httptrace.GotConnInfo) { events = append(events, "conn"); reused = info.Reused },
			WroteHeaders:         func() { events = append(events, "headers") },
			WroteRequest:         func(httptrace.WroteRequestInfo) { events = append(events, "request") },
			GotFirstResponseByte: func() { events = append(events, "first byte") },
		})
		if code, _, err := roundTrip(t, tr, ctx, srv.URL); err != nil || code != 201 {
			t.Fatalf("request %d: %d %v", i, code, err)
		}
		if got := strings.Join(events, ","); got != "conn,headers,request,first byte" || reused != wantReused {
			t.Errorf("request %d: hooks %s, reused %v; want conn,headers,request,first byte and reused %v", i, got, reused, wantReused)
		}
	}
}

// What net/http refuses before connecting is refused here too, with its
// message, and no connection is made: a header value carrying CR LF can
// never smuggle a second request.
func TestTransportRefusesBadRequests(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	cases := map[string]func(r *http.Request){
		"invalid header field value": func(r *http.Request) {
			r.Header["X-Note"] = []string{"a\r\nPOST /evil HTTP/1.1"}
		},
		"invalid header field name": func(r *http.Request) { r.Header["Bad Name"] = []string{"x"} },
		"invalid method":            func(r *http.Request) { r.Method = "BAD METHOD" },
		"unsupported protocol scheme": func(r *http.Request) {
			r.URL = &url.URL{Scheme: "ftp", Host: r.URL.Host, Path: "/"}
		},
		"no Host in request URL": func(r *http.Request) { r.URL = &url.URL{Scheme: "http", Path: "/"} },
	}
	for want, mod := range cases {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		mod(req)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: no error", want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to contain %q", err, want)
		}
	}
	if c := srv.conns.Load(); c != 0 {
		t.Errorf("server saw %d connections; want none", c)
	}
}

// Requests that go through a proxy use net/http's Transport.
func TestTransportUsesProxy(t *testing.T) {
	t.Parallel()
	var sawAbsolute atomic.Bool
	proxy := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		sawAbsolute.Store(r.URL.IsAbs() && r.URL.Host == "target.invalid")
		w.WriteHeader(http.StatusAccepted)
	})
	pu, _ := url.Parse(proxy.URL)
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4, Proxy: http.ProxyURL(pu)})
	if code, _, err := roundTrip(t, tr, context.Background(), "http://target.invalid/pay"); err != nil || code != http.StatusAccepted {
		t.Fatalf("through the proxy: %d %v; want 202 from the proxy", code, err)
	}
	if !sawAbsolute.Load() {
		t.Error("the proxy did not receive the request in proxy form")
	}
}

// HTTPS goes through crypto/tls with the server's name checked, HTTP/1.1
// only, and the connection is kept across requests.
func TestTransportHTTPS(t *testing.T) {
	t.Parallel()
	var conns, reqs atomic.Int64
	var proto atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		proto.Store(r.Proto)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "tls ok")
	}))
	srv.EnableHTTP2 = true // offered by the server; the transport must still speak HTTP/1.1
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4,
		TLSConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}})
	for i := range 3 {
		if code, body, err := roundTrip(t, tr, context.Background(), srv.URL); err != nil || code != 201 || body != "tls ok" {
			t.Fatalf("request %d: %d %q %v; want 201 tls ok", i, code, body, err)
		}
	}
	if c, r := conns.Load(), reqs.Load(); c != 1 || r != 3 {
		t.Errorf("server saw %d connections, %d requests; want 1 and 3", c, r)
	}
	if p, _ := proto.Load().(string); p != "HTTP/1.1" {
		t.Errorf("request protocol %q; want HTTP/1.1", p)
	}
	// Without the test CA the certificate is refused before anything is sent.
	plain := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	before := reqs.Load()
	if _, _, err := roundTrip(t, plain, context.Background(), srv.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("unknown CA: err %v; want a certificate error", err)
	}
	if reqs.Load() != before {
		t.Error("a request reached the server over an unverified connection")
	}
}

// Responses without a body (204, HEAD) leave the connection reusable.
func TestTransportReusesAfterEmptyResponses(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	client := tr.client
	for _, m := range []string{http.MethodHead, http.MethodPost, http.MethodHead, http.MethodPost} {
		req, _ := http.NewRequest(m, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if c, r := srv.conns.Load(), srv.reqs.Load(); c != 1 || r != 4 {
		t.Errorf("server saw %d connections, %d requests; want 1 and 4", c, r)
	}
}

// Connections idle longer than IdleTimeout are closed by a sweep even when
// no more requests come, and the host's entry goes with them.
func TestTransportClosesIdleConnections(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4, IdleTimeout: 50 * time.Millisecond})
	if code, _, err := roundTrip(t, tr, context.Background(), srv.URL); err != nil || code != 201 {
		t.Fatalf("got %d %v; want 201", code, err)
	}
	waitFor(t, srv.closed, "close of the idle connection by the sweep (idle timeout 50ms)")
	tr.mu.Lock()
	n := len(tr.hosts)
	tr.mu.Unlock()
	if n != 0 {
		t.Errorf("%d host entries left after the sweep; want 0", n)
	}
}

// heldTarget reads a request head, writes answer, and then neither reads
// nor closes until the test ends.
func heldTarget(t *testing.T, answer string) string {
	t.Helper()
	ln := loopback.Serve(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, answer)
		<-t.Context().Done()
	})
	return "http://" + ln.Addr().String()
}

// The response head cannot be read (malformed, or over the header cap)
// while the 8 MiB body is still being written to a target that stopped
// reading: the write is cut off at once and the bad answer reported, not
// the request's deadline after a write that could never finish.
func TestLargeBodyBadAnswerReportedAtOnce(t *testing.T) {
	t.Parallel()
	url := heldTarget(t, "HTTP/1.1 abc nonsense\r\n\r\n")
	tr := newTransport(t, Options{MaxConnsPerHost: 2, MaxIdlePerHost: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, io.NopCloser(bytes.NewReader(make([]byte, 8<<20))))
	req.ContentLength = 8 << 20
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	took := time.Since(start)
	if resp != nil {
		resp.Body.Close()
	}
	t.Logf("after %v: err=%v", took.Round(time.Millisecond), err)
	if took > 2*time.Second {
		t.Errorf("a malformed answer took %v to report (the request's deadline); want at once", took.Round(time.Millisecond))
	}
}

// A target that reads each 64 KiB request fully and then answers at once
// on a keep-alive connection: the answer often arrives before the writer
// goroutine has handed its result over; the complete write is still seen
// as complete, and the one connection serves every exchange.
func TestLargeBodyConnectionReused(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	ln := loopback.Serve(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	tr := newTransport(t, Options{MaxConnsPerHost: 2, MaxIdlePerHost: 2})
	const n = 200
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String(), io.NopCloser(bytes.NewReader(make([]byte, 64<<10))))
		req.ContentLength = 64 << 10
		resp, err := tr.RoundTrip(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
	}
	if c := conns.Load(); c > 1 {
		t.Errorf("%d sequential in-step exchanges used %d connections; want 1", n, c)
	}
}
