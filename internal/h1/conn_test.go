package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
)

// heldConn passes writes through, except between hold and flush, when it
// gathers them and writes them to the socket in one call.
type heldConn struct {
	net.Conn
	held bool
	buf  []byte
}

func (h *heldConn) Write(p []byte) (int, error) {
	if h.held {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}

func (h *heldConn) hold() { h.held = true }

func (h *heldConn) flush() error {
	h.held = false
	_, err := h.Conn.Write(h.buf)
	h.buf = h.buf[:0]
	return err
}

// strayServer serves on ln, over TLS when cfg is set: every request gets a
// 201 whose body names its connection ("conn-N") followed, unasked, by a
// stray 408 response on the same connection. Both leave in one write to
// the socket, so they reach the client together (over TLS as two records,
// the second one read ahead by the client's TLS layer).
func strayServer(t *testing.T, ln net.Listener, cfg *tls.Config) (conns, reqs *atomic.Int64) {
	t.Helper()
	t.Cleanup(func() { ln.Close() })
	conns, reqs = new(atomic.Int64), new(atomic.Int64)
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func(raw net.Conn, n int64) {
				hc := &heldConn{Conn: raw}
				var c net.Conn = hc
				if cfg != nil {
					c = tls.Server(hc, cfg)
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					reqs.Add(1)
					hc.hold()
					_, _ = fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nContent-Length: 6\r\n\r\nconn-%d", n)
					_, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 5\r\n\r\nSTRAY")
					if hc.flush() != nil {
						return
					}
				}
			}(raw, n)
		}
	}()
	return conns, reqs
}

// testOutOfStep sends 3 requests through tr to target on a strayServer and
// wants each answered by a fresh connection, never by the stray response.
func testOutOfStep(t *testing.T, tr *Transport, target string, conns, reqs *atomic.Int64) {
	t.Helper()
	for i := range 3 {
		code, body, err := roundTrip(t, tr, context.Background(), target)
		if want := fmt.Sprintf("conn-%d", i+1); err != nil || code != 201 || body != want {
			t.Fatalf("request %d: %d %q %v; want 201 %s from a fresh connection", i, code, body, err, want)
		}
	}
	if c, r := conns.Load(), reqs.Load(); c != 3 || r != 3 {
		t.Errorf("server saw %d connections, %d requests; want 3 and 3", c, r)
	}
}

// A server that speaks out of turn (an unsolicited response after the real
// one) leaves bytes on the idle connection: the connection is dropped, so
// the next request never reads them as its answer.
func TestTransportDropsConnectionsOutOfStep(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns, reqs := strayServer(t, ln, nil)
	testOutOfStep(t, newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4}), "http://"+ln.Addr().String()+"/pay", conns, reqs)
}

// Over TLS the stray response may sit in the TLS layer's read-ahead
// buffer, out of sight of a peek at the socket: it is found there too.
func TestTransportDropsTLSConnectionsOutOfStep(t *testing.T) {
	t.Parallel()
	cert, pool := testCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns, reqs := strayServer(t, ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	testOutOfStep(t, newTLSTransport(t, pool), "https://"+ln.Addr().String()+"/pay", conns, reqs)
}

// testCert is httptest's certificate and a pool that trusts it, for
// servers written by hand.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	return ts.TLS.Certificates[0], ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

// newTLSTransport is a transport that trusts pool and expects testCert's
// certificate, whatever the address dialed.
func newTLSTransport(t *testing.T, pool *x509.CertPool) *Transport {
	return newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"}}) // a name the certificate has
}

// splitConn gathers the server's writes while held; release sends all of
// them but the last `keep` bytes in one socket write and keeps those back
// until sendRest.
type splitConn struct {
	net.Conn
	mu   sync.Mutex
	held bool
	buf  []byte
	rest []byte
}

func (s *splitConn) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	return s.Conn.Write(p)
}

func (s *splitConn) hold() { s.mu.Lock(); s.held = true; s.mu.Unlock() }

func (s *splitConn) release(keep int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = false
	cut := len(s.buf) - keep
	s.rest = append([]byte(nil), s.buf[cut:]...)
	_, err := s.Conn.Write(s.buf[:cut])
	s.buf = s.buf[:0]
	return err
}

func (s *splitConn) sendRest() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.Conn.Write(s.rest)
	s.rest = nil
	return err
}

// partialStrayServer serves two requests on a connection, through wrap (TLS, or
// none): the first answer is followed by a stray 408 of which all but the
// last 4 bytes are sent (for TLS, the record's last bytes), and the rest of
// it comes only once the second request has arrived, before that
// request's own answer. reqs counts the requests read; released is closed
// once the first connection's partial stray answer has been written.
func partialStrayServer(t *testing.T, wrap func(net.Conn) net.Conn, reqs *atomic.Int64, released chan struct{}) func(net.Conn) {
	var once sync.Once
	return func(raw net.Conn) {
		sc := &splitConn{Conn: raw}
		c := wrap(sc)
		br := bufio.NewReader(c)
		for n := 1; n <= 2; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			reqs.Add(1)
			if n == 2 {
				// The rest of the stray answer, then the real one.
				if sc.sendRest() != nil {
					return
				}
				_, _ = fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nreq-%d", n)
				<-t.Context().Done()
				return
			}
			sc.hold()
			_, _ = fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nreq-%d", n)
			_, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 5\r\n\r\nSTRAY")
			if sc.release(4) != nil { // the stray answer's last 4 bytes held back
				return
			}
			once.Do(func() { close(released) })
		}
	}
}

// A TLS server speaks out of turn: after its answer to request 1 it sends
// an unsolicited 408 whose TLS record arrives only in part (all but its
// last bytes) while the connection is idle. The stray bytes are waiting on
// the connection, so the liveness check must drop it, exactly as it does
// over plain TCP (TestTransportDropsConnectionsOutOfStep). The partial
// record sits in crypto/tls's raw input buffer, out of sight of the socket
// peek and of quiet()'s read; without the record tracker under the TLS
// connection, the connection would be reused and request 2 would read the
// stray 408 as its own answer (a 408 says "not processed": a caller would
// send again a request the server did process).
func TestTLSPartialStrayRecordDropsTheConnection(t *testing.T) {
	t.Parallel()
	cert, pool := testCert(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	var reqs atomic.Int64
	released := make(chan struct{})
	ln := loopback.Serve(t, partialStrayServer(t, func(c net.Conn) net.Conn { return tls.Server(c, cfg) }, &reqs, released))
	tr := newTLSTransport(t, pool)
	target := "https://" + ln.Addr().String() + "/pay"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if code, body, err := roundTrip(t, tr, ctx, target); err != nil || code != 201 || body != "req-1" {
		t.Fatalf("request 1: %d %q %v", code, body, err)
	}
	waitFor(t, released, "the partial stray record") // the connection sits idle with it
	reused := false
	ctx2 := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	code, body, err := roundTrip(t, tr, ctx2, target)
	t.Logf("request 2: %d %q %v (reused %v, server saw %d requests)", code, body, err, reused, reqs.Load())
	if code == 408 || body == "STRAY" {
		t.Fatalf("request 2 got the stray answer (%d %q) on a reused connection; want its own answer on a fresh connection", code, body)
	}
}

// The plain-TCP analog of TestTLSPartialStrayRecordDropsTheConnection: a
// partial stray answer waiting on an idle connection is seen by the socket
// peek and the connection is dropped.
func TestTCPPartialStrayDropsTheConnection(t *testing.T) {
	t.Parallel()
	var reqs atomic.Int64
	released := make(chan struct{})
	ln := loopback.Serve(t, partialStrayServer(t, func(c net.Conn) net.Conn { return c }, &reqs, released))
	tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	target := "http://" + ln.Addr().String() + "/pay"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if code, body, err := roundTrip(t, tr, ctx, target); err != nil || code != 201 || body != "req-1" {
		t.Fatalf("request 1: %d %q %v", code, body, err)
	}
	waitFor(t, released, "the partial stray answer")
	code, body, err := roundTrip(t, tr, ctx, target)
	t.Logf("request 2: %d %q %v", code, body, err)
	if code == 408 || body == "STRAY" {
		t.Fatalf("request 2 got the stray answer")
	}
}

// Framings whose first answer carries bytes beyond what the framing says
// (a body on 204/304/HEAD, chunked plus Content-Length with extra bytes):
// the second request, on the same transport, must get its own answer.
func TestFramingExtraBytesDropTheConnection(t *testing.T) {
	t.Parallel()
	stray := "HTTP/1.1 408 Request Timeout\r\nContent-Length: 5\r\n\r\nSTRAY"
	for _, tc := range []struct{ name, method, first string }{
		{"204 with body", "POST", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello" + stray},
		{"304 with body", "POST", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello" + stray},
		{"HEAD with body", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" + stray},
		{"HEAD chunked body", "HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + stray},
		{"chunked and length", "POST", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n2\r\nok\r\n0\r\n\r\n" + stray},
		{"interim then final then stray", "POST", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok" + stray},
		{"short body then stray", "POST", "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok" + stray},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sent := make(chan struct{}) // the first answer, stray bytes included, is written
			var once sync.Once
			ln := loopback.Serve(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				for n := 1; n <= 2; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					ans := tc.first
					if n == 2 || req.URL.Path == "/second" {
						ans = "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmine"
					}
					if _, err := io.WriteString(c, ans); err != nil {
						return
					}
					once.Do(func() { close(sent) })
				}
			})
			tr := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
			base := "http://" + ln.Addr().String()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, tc.method, base+"/first", nil)
			resp, err := tr.client.Do(req)
			if err != nil {
				t.Fatalf("first: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			waitFor(t, sent, "the first answer")
			code, body, err := roundTrip(t, tr, ctx, base+"/second")
			if err != nil || code != 201 || body != "mine" {
				t.Errorf("second: %d %q %v; want 201 mine", code, body, err)
			}
		})
	}
}
