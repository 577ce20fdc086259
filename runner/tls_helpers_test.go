package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/h1"
	"github.com/idemrun/idemrun/internal/loopback"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// tlsTarget is a TLS httptest server on 127.0.0.1 counting requests that
// reach its handler, and TCP connections (StateNew).
type tlsTarget struct {
	srv   *httptest.Server
	hits  atomic.Int64
	conns atomic.Int64
	pool  *x509.CertPool
}

func newTLSTarget(t *testing.T, h http.HandlerFunc, configure ...func(*httptest.Server)) *tlsTarget {
	t.Helper()
	tg := &tlsTarget{}
	tg.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		tg.hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "ok")
	}))
	tg.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tg.conns.Add(1)
		}
	}
	for _, c := range configure {
		c(tg.srv)
	}
	tg.srv.StartTLS()
	t.Cleanup(tg.srv.Close)
	tg.pool = tg.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return tg
}

// tlsDoer is the runner's default Doer (own transport) trusting pool.
func tlsDoer(t *testing.T, pool *x509.CertPool) Doer { return tlsDoerVia(t, pool, nil) }

// tlsDoerVia is tlsDoer sending through the proxy at proxy (nil: the one
// the environment names, if any).
func tlsDoerVia(t *testing.T, pool *x509.CertPool, proxy *url.URL) Doer {
	tr := h1.New(viaProxy(transportOptions(4, 4, nil, &tls.Config{RootCAs: pool}), proxy))
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// viaProxy is o sending through the proxy at proxy (nil: o unchanged).
func viaProxy(o h1.Options, proxy *url.URL) h1.Options {
	if proxy != nil {
		o.Proxy = http.ProxyURL(proxy)
	}
	return o
}

// tlsNetDoer is the NetHTTP Doer trusting pool.
func tlsNetDoer(t *testing.T, pool *x509.CertPool) (Doer, *http.Transport) {
	c := netHTTPClient(4, 4, nil, nil)
	ht := c.Transport.(*http.Transport)
	ht.TLSClientConfig.RootCAs = pool
	t.Cleanup(ht.CloseIdleConnections)
	return c, ht
}

func tlsJob(u string) *store.Job {
	now := time.Now()
	id := store.NewID()
	return &store.Job{
		ID: id, Key: idemkey.New(), Fingerprint: "fp-" + id, State: store.StatePending,
		Request: store.Request{Method: http.MethodPost, URL: u,
			Header: []store.HeaderField{{Name: "Content-Type", Value: "application/json"}},
			Body:   []byte(`{"amount":1}`)},
		MaxAttempts: 3, DeadlineAfter: time.Minute, AttemptTimeout: 2 * time.Second,
		CreatedAt: now, UpdatedAt: now, NextRunAt: now, Deadline: now.Add(time.Minute),
	}
}

// classifyOnce is one attempt classified exactly as Runner.attempt does.
func classifyOnce(t *testing.T, d Doer, j *store.Job, timeout time.Duration) (Verdict, sendResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res := send(ctx, d, j, 64<<10, time.Now)
	rules := ClassifyRules{NoEffectStatuses: j.NoEffectStatuses, ReplaySafe: replaySafe(j)}
	if res.status != 0 {
		return ClassifyResponse(res.status, rules), res
	}
	return ClassifyError(res.err, res.progress, false, rules), res
}

// runJob runs a runner with doer until idle and returns the job.
func runJob(t *testing.T, d Doer, j *store.Job, mod ...func(*Config)) *store.Job {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 2, UntilIdle: true, Doer: d,
		Backoff:       Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		StatusBackoff: Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		QuietPeriod:   10 * time.Millisecond, StartupSpread: time.Millisecond,
		Settle:       -1, // no window: the test targets show every create at once
		PollInterval: 20 * time.Millisecond, ShutdownGrace: 200 * time.Millisecond, Rand: NewRand(1)}
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := New(db, cfg).Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got, err := db.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// selfSigned makes a self-signed CA certificate for 127.0.0.1 valid in
// [notBefore, notAfter].
func selfSigned(t *testing.T, notBefore, notAfter time.Time) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	return selfSignedFrom(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idemrun-test"},
		NotBefore: notBefore, NotAfter: notAfter,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 255, 255, 1), net.IPv4(10, 255, 255, 2)}, DNSNames: []string{"example.com"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// selfSignedFrom makes a self-signed CA certificate from tmpl (a fresh
// P-256 key; tmpl's key usage and CA fields are set here) and the pool
// that trusts it.
func selfSignedFrom(t *testing.T, tmpl *x509.Certificate) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// fakeProxy is a forward proxy on 127.0.0.1: CONNECT tunnels to the
// address asked for (or answers connectStatus when set), absolute-form
// requests are forwarded to the origin over one upstream connection per
// client connection. onRequest, when set, sees the n-th forwarded request
// on a client connection (1-based) after its answer came back and may
// return false to drop the client connection instead of relaying it.
type fakeProxy struct {
	ln            net.Listener
	connectStatus int
	connects      atomic.Int64
	forwarded     atomic.Int64
	raw           [][]byte
	mu            sync.Mutex
	onRequest     func(n int) bool
	resolve       func(hostport string) string
}

func newFakeProxy(t *testing.T) *fakeProxy {
	p := &fakeProxy{}
	p.ln = loopback.Serve(t, p.serve)
	return p
}

func (p *fakeProxy) URL() *url.URL { return &url.URL{Scheme: "http", Host: p.ln.Addr().String()} }

func (p *fakeProxy) addr(hp string) string {
	if p.resolve != nil {
		return p.resolve(hp)
	}
	return hp
}

// serve answers one client connection (loopback.Serve closes it).
func (p *fakeProxy) serve(c net.Conn) {
	br := bufio.NewReader(c)
	var up net.Conn
	var upr *bufio.Reader
	defer func() {
		if up != nil {
			up.Close()
		}
	}()
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method == http.MethodConnect {
			p.connects.Add(1)
			if p.connectStatus != 0 {
				c.Write([]byte("HTTP/1.1 " + strconv.Itoa(p.connectStatus) + " " + http.StatusText(p.connectStatus) + "\r\nContent-Length: 0\r\n\r\n"))
				continue
			}
			u, err := net.Dial("tcp", p.addr(req.Host))
			if err != nil {
				c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"))
				return
			}
			defer u.Close()
			c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
			go io.Copy(u, br)
			io.Copy(c, u)
			return
		}
		p.forwarded.Add(1)
		if up == nil {
			up, err = net.Dial("tcp", p.addr(req.URL.Host))
			if err != nil {
				c.Write([]byte("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"))
				return
			}
			upr = bufio.NewReader(up)
		}
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.raw = append(p.raw, append([]byte(req.Method+" "+req.RequestURI+" "), body...))
		p.mu.Unlock()
		if err := req.Write(up); err != nil {
			return
		}
		resp, err := http.ReadResponse(upr, req)
		if err != nil {
			return
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(rb))
		if p.onRequest != nil && !p.onRequest(n) {
			return // drop the client connection after the origin answered
		}
		resp.ContentLength = int64(len(rb))
		resp.TransferEncoding = nil
		resp.Write(c)
	}
}
