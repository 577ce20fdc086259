package runner

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
	"github.com/idemrun/idemrun/store"
)

// newPlain is a plain HTTP target counting handler hits; it answers
// codes[0] (201 when none).
func newPlain(t *testing.T, hits *atomic.Int64, codes ...int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		hits.Add(1)
		code := 201
		if len(codes) > 0 {
			code = codes[0]
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// rawProxy records the exact bytes of every request sent to it and
// answers 429 with Connection: close.
func rawProxy(t *testing.T) (*url.URL, func() []string) {
	var mu sync.Mutex
	var recs []string
	ln := loopback.Serve(t, func(c net.Conn) {
		var buf bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &buf))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.ReadAll(req.Body)
		mu.Lock()
		recs = append(recs, buf.String())
		mu.Unlock()
		io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	})
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), recs...)
	}
}

func bothDoers(t *testing.T, pool *tlsTarget, f func(t *testing.T, d Doer)) {
	t.Run("own", func(t *testing.T) {
		var d Doer
		if pool != nil {
			d = tlsDoer(t, pool.pool)
		} else {
			d = tlsDoer(t, nil)
		}
		f(t, d)
	})
	t.Run("nethttp", func(t *testing.T) {
		var d Doer
		if pool != nil {
			d, _ = tlsNetDoer(t, pool.pool)
		} else {
			d, _ = tlsNetDoer(t, nil)
		}
		f(t, d)
	})
}

func TestTLSUnknownCA(t *testing.T) {
	tg := newTLSTarget(t, nil)
	bothDoers(t, nil, func(t *testing.T, d Doer) {
		before := tg.hits.Load()
		v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
		t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
		if v.Class != ClassPermanent || tg.hits.Load() != before {
			t.Fatalf("class %s hits %d", v.Class, tg.hits.Load()-before)
		}
	})
}

func TestTLSWrongHost(t *testing.T) {
	tg := newTLSTarget(t, nil)
	u := strings.Replace(tg.srv.URL, "127.0.0.1", "localhost", 1)
	bothDoers(t, tg, func(t *testing.T, d Doer) {
		v, res := classifyOnce(t, d, tlsJob(u+"/p"), 2*time.Second)
		t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
		if v.Class != ClassPermanent || tg.hits.Load() != 0 {
			t.Fatalf("class %s hits %d", v.Class, tg.hits.Load())
		}
	})
}

func TestTLSExpired(t *testing.T) {
	cert, pool := selfSigned(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	tg := newTLSTarget(t, nil, func(s *httptest.Server) { s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}} })
	tg.pool = pool
	bothDoers(t, tg, func(t *testing.T, d Doer) {
		v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
		t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
		if v.Class != ClassPermanent || tg.hits.Load() != 0 {
			t.Fatalf("class %s hits %d", v.Class, tg.hits.Load())
		}
	})
	// End to end: failed after one attempt.
	d := tlsDoer(t, pool)
	j := runJob(t, d, tlsJob(tg.srv.URL+"/p"))
	t.Logf("final %s attempts %d last %q", j.State, j.Attempts, j.LastError)
	if j.State != store.StateFailed || j.Attempts != 1 {
		t.Fatalf("state %s attempts %d", j.State, j.Attempts)
	}
}

// stallListener accepts and then holds connections without a byte.
func stallListener(t *testing.T, afterAccept func(c net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var hmu sync.Mutex
	t.Cleanup(func() {
		hmu.Lock()
		defer hmu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, c)
			hmu.Unlock()
			if afterAccept != nil {
				go afterAccept(c)
			}
		}
	}()
	return ln.Addr().String()
}

func TestTLSHandshakeStall(t *testing.T) {
	addr := stallListener(t, nil)
	bothDoers(t, nil, func(t *testing.T, d Doer) {
		start := time.Now()
		v, res := classifyOnce(t, d, tlsJob("https://"+addr+"/p"), 300*time.Millisecond)
		t.Logf("class=%s reason=%q err=%v took=%v", v.Class, v.Reason, res.err, time.Since(start))
		if v.Class != ClassNoEffect || time.Since(start) > 2*time.Second {
			t.Fatalf("class %s", v.Class)
		}
	})
	d := tlsDoer(t, nil)
	j := tlsJob("https://" + addr + "/p")
	j.AttemptTimeout = 200 * time.Millisecond
	j = runJob(t, d, j)
	t.Logf("final %s attempts %d last %q", j.State, j.Attempts, j.LastError)
	if j.State != store.StateFailed {
		t.Fatalf("state %s", j.State)
	}
}

func TestTLSPlainHTTPOnHTTPSURL(t *testing.T) {
	var hits atomic.Int64
	srv := newPlain(t, &hits)
	u := strings.Replace(srv, "http://", "https://", 1)
	bothDoers(t, nil, func(t *testing.T, d Doer) {
		v, res := classifyOnce(t, d, tlsJob(u+"/p"), 2*time.Second)
		t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
		if v.Class != ClassNoEffect || hits.Load() != 0 {
			t.Fatalf("class %s hits %d", v.Class, hits.Load())
		}
	})
	d := tlsDoer(t, nil)
	j := runJob(t, d, tlsJob(u+"/p"))
	t.Logf("final %s attempts %d last %q", j.State, j.Attempts, j.LastError)
	if j.State != store.StateFailed || hits.Load() != 0 {
		t.Fatalf("state %s", j.State)
	}
}

// A TLS server that completes the handshake and closes without reading.
func TestTLSClosedAfterHandshake(t *testing.T) {
	tg := newTLSTarget(t, nil) // for its certificate
	cfg := &tls.Config{Certificates: tg.srv.TLS.Certificates}
	addr := stallListener(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		if tc.Handshake() == nil {
			tc.Close()
		}
	})
	bothDoers(t, tg, func(t *testing.T, d Doer) {
		v, res := classifyOnce(t, d, tlsJob("https://"+addr+"/p"), 2*time.Second)
		t.Logf("class=%s reason=%q err=%v progress=%+v", v.Class, v.Reason, res.err, res.progress)
	})
}

// TLS 1.3 server requiring a client certificate: the client's handshake
// "succeeds", the server's fails; the alert arrives after the request was
// written. The server's TLS layer never decrypted the request.
func TestTLS13ClientCertRequired(t *testing.T) {
	for _, ver := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(ver), func(t *testing.T) {
			tg := newTLSTarget(t, nil, func(s *httptest.Server) {
				s.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MaxVersion: ver}
			})
			bothDoers(t, tg, func(t *testing.T, d Doer) {
				v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
				t.Logf("class=%s reason=%q err=%v progress=%+v hits=%d", v.Class, v.Reason, res.err, res.progress, tg.hits.Load())
				if tg.hits.Load() != 0 {
					t.Fatal("handler reached")
				}
				if v.Class == ClassUnknown {
					t.Errorf("TLS handshake failure (%s) classified unknown; ARCHITECTURE.md §3: TLS handshake failure is no effect", tls.VersionName(ver))
				}
			})
		})
	}
}

func TestTLSReuse(t *testing.T) {
	tg := newTLSTarget(t, nil)
	d := tlsDoer(t, tg.pool)
	for i := 0; i < 5; i++ {
		v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
		if v.Class != ClassSucceeded {
			t.Fatalf("attempt %d: %s %v", i, v.Class, res.err)
		}
		if i > 0 && !res.progress.Reused {
			t.Errorf("attempt %d not on a reused connection", i)
		}
	}
	if tg.hits.Load() != 5 || tg.conns.Load() != 1 {
		t.Fatalf("hits %d conns %d", tg.hits.Load(), tg.conns.Load())
	}
}

// The server closes idle TLS connections (close_notify + FIN); the next
// attempt must dial afresh, not write on the dead connection.
func TestTLSIdleClosedByServer(t *testing.T) {
	for _, mode := range []string{"close_notify", "raw_fin", "idle_timeout"} {
		t.Run(mode, func(t *testing.T) {
			var conns []net.Conn
			var mu = make(chan struct{}, 1)
			mu <- struct{}{}
			tg := newTLSTarget(t, nil, func(s *httptest.Server) {
				prev := s.Config.ConnState
				s.Config.ConnState = func(c net.Conn, st http.ConnState) {
					prev(c, st)
					<-mu
					if st == http.StateNew {
						conns = append(conns, c)
					}
					mu <- struct{}{}
				}
				if mode == "idle_timeout" {
					s.Config.IdleTimeout = 100 * time.Millisecond
				}
			})
			bothDoers(t, tg, func(t *testing.T, d Doer) {
				h0 := tg.hits.Load()
				v, _ := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
				if v.Class != ClassSucceeded {
					t.Fatal(v)
				}
				<-mu
				last := conns[len(conns)-1]
				mu <- struct{}{}
				switch mode {
				case "close_notify":
					last.Close() // *tls.Conn: sends close_notify
				case "raw_fin":
					last.(*tls.Conn).NetConn().Close()
				case "idle_timeout":
				}
				time.Sleep(200 * time.Millisecond)
				v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
				t.Logf("second: class=%s reason=%q err=%v progress=%+v", v.Class, v.Reason, res.err, res.progress)
				if v.Class != ClassSucceeded || res.progress.Reused || tg.hits.Load()-h0 != 2 {
					t.Fatalf("second attempt %s reused=%v hits=%d", v.Class, res.progress.Reused, tg.hits.Load()-h0)
				}
			})
		})
	}
}

// Through an HTTP proxy (the proxy path uses net/http's Transport): a
// reused proxy connection that the proxy drops after the origin answered
// must give one unknown attempt, not a silent resend.
func TestProxyNoSilentResend(t *testing.T) {
	var hits atomic.Int64
	origin := newPlain(t, &hits)
	for _, tc := range []struct {
		name, method string
		body         []byte
	}{
		{"post-body", "POST", []byte(`{"a":1}`)},
		{"post-empty", "POST", nil},
		{"put-empty", "PUT", nil},
		{"get", "GET", nil},
		{"delete", "DELETE", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProxy(t)
			p.onRequest = func(n int) bool { return n != 2 }
			d := tlsDoerVia(t, nil, p.URL())
			h0 := hits.Load()
			j := tlsJob(origin + "/p")
			j.Request.Method, j.Request.Body = tc.method, tc.body
			v1, r1 := classifyOnce(t, d, j, 2*time.Second)
			v2, r2 := classifyOnce(t, d, j, 2*time.Second)
			t.Logf("1: %s %v; 2: %s %q %v %+v; origin hits %d, proxy forwarded %d", v1.Class, r1.err, v2.Class, v2.Reason, r2.err, r2.progress, hits.Load()-h0, p.forwarded.Load())
			if hits.Load()-h0 != 2 || p.forwarded.Load() != 2 {
				t.Errorf("origin got %d requests for 2 attempts (a silent resend)", hits.Load()-h0)
			}
			if v2.Class != ClassUnknown && !(j.Request.Method == "GET") {
				t.Errorf("second attempt %s, want unknown", v2.Class)
			}
		})
	}
}

// P2 through the proxy: two attempts of one job reach the proxy with the
// same bytes.
func TestProxySameBytes(t *testing.T) {
	pu, plainRecords := rawProxy(t)
	d := tlsDoerVia(t, nil, pu)
	j := tlsJob("http://target.test:8080/p")
	j.MaxAttempts = 2
	j = runJob(t, d, j)
	t.Logf("final %s attempts %d", j.State, j.Attempts)
	recs := plainRecords()
	t.Logf("%q", recs)
	if len(recs) < 2 || recs[len(recs)-1] != recs[len(recs)-2] {
		t.Fatalf("attempt bytes differ:\n%q", recs)
	}
}

// CONNECT refused by the proxy: nothing reached the target.
func TestProxyConnectFailure(t *testing.T) {
	tg := newTLSTarget(t, nil)
	for _, code := range []int{403, 407, 502, 503} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			p := newFakeProxy(t)
			p.connectStatus = code
			d := tlsDoerVia(t, tg.pool, p.URL())
			v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
			t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
			if v.Class != ClassNoEffect || tg.hits.Load() != 0 || p.connects.Load() != 1 {
				t.Fatalf("class %s hits %d", v.Class, tg.hits.Load())
			}
		})
	}
	t.Run("proxy refused", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		pu := &url.URL{Scheme: "http", Host: ln.Addr().String()}
		ln.Close()
		d := tlsDoerVia(t, tg.pool, pu)
		v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
		t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
		if v.Class != ClassNoEffect {
			t.Fatal(v.Class)
		}
	})
	t.Run("connect stall", func(t *testing.T) {
		addr := stallListener(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		pu := &url.URL{Scheme: "http", Host: addr}
		d := tlsDoerVia(t, tg.pool, pu)
		v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 300*time.Millisecond)
		t.Logf("class=%s reason=%q err=%v", v.Class, v.Reason, res.err)
		if v.Class != ClassNoEffect {
			t.Fatal(v.Class)
		}
	})
	t.Run("https through tunnel ok and cert error", func(t *testing.T) {
		p := newFakeProxy(t)
		d := tlsDoerVia(t, tg.pool, p.URL())
		v, res := classifyOnce(t, d, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
		t.Logf("ok: class=%s err=%v hits=%d", v.Class, res.err, tg.hits.Load())
		if v.Class != ClassSucceeded || tg.hits.Load() != 1 {
			t.Fatal(v.Class)
		}
		d2 := tlsDoerVia(t, nil, p.URL())
		v, res = classifyOnce(t, d2, tlsJob(tg.srv.URL+"/p"), 2*time.Second)
		t.Logf("unknown CA via tunnel: class=%s err=%v", v.Class, res.err)
		if v.Class != ClassPermanent || tg.hits.Load() != 1 {
			t.Fatal(v.Class)
		}
	})
}

// End to end: a TLS 1.3 target that requires a client certificate, no
// status URL. Nothing reached the handler.
func TestTLS13ClientCertRequiredEndState(t *testing.T) {
	tg := newTLSTarget(t, nil, func(s *httptest.Server) {
		s.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	})
	d := tlsDoer(t, tg.pool)
	j := runJob(t, d, tlsJob(tg.srv.URL+"/p"))
	t.Logf("final %s attempts %d class %s last %q hits %d", j.State, j.Attempts, j.LastClass, j.LastError, tg.hits.Load())
	if j.State != store.StateFailed {
		t.Errorf("state %s, want failed (TLS handshake failure: no effect; nothing reached the target)", j.State)
	}
}

// End to end: closes right after the handshake, no status URL.
func TestTLSClosedAfterHandshakeEndState(t *testing.T) {
	tg := newTLSTarget(t, nil)
	cfg := &tls.Config{Certificates: tg.srv.TLS.Certificates}
	addr := stallListener(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		if tc.Handshake() == nil {
			tc.Close()
		}
	})
	d := tlsDoer(t, tg.pool)
	j := runJob(t, d, tlsJob("https://"+addr+"/p"))
	t.Logf("final %s attempts %d class %s last %q", j.State, j.Attempts, j.LastClass, j.LastError)
}
