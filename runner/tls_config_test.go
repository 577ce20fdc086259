package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/h1"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// clientCert makes a self-signed client certificate and the pool a server
// verifies it with.
func clientCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	now := time.Now()
	return selfSignedFrom(t, &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "idemrun-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Config.TLSConfig reaches the default Doer (both transports) and the
// default status checker: a target behind a private CA that requires a
// client certificate is sent to, and its status URL queried, only with
// them; without, nothing reaches its handler.
func TestTLSConfigPrivateCAAndClientCertificate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	serverCert, serverPool := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	cc, clientPool := clientCert(t)
	mtls := func(s *httptest.Server) {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientPool}
	}
	full := &tls.Config{RootCAs: serverPool, Certificates: []tls.Certificate{cc}}
	for _, netHTTP := range []bool{false, true} {
		tg := newTLSTarget(t, nil, mtls)
		got := runJob(t, nil, tlsJob(tg.srv.URL+"/pay"), func(c *Config) { c.TLSConfig = full; c.NetHTTP = netHTTP })
		if got.State != store.StateSucceeded || tg.hits.Load() != 1 {
			t.Errorf("NetHTTP %v, CA and client certificate: %s after %d requests at the target, want succeeded after 1 (%s)", netHTTP, got.State, tg.hits.Load(), got.LastError)
		}
	}
	for name, cfg := range map[string]*tls.Config{
		"no TLSConfig":       nil,
		"CA, no client cert": {RootCAs: serverPool},
		"client cert, no CA": {Certificates: []tls.Certificate{cc}},
	} {
		tg := newTLSTarget(t, nil, mtls)
		got := runJob(t, nil, tlsJob(tg.srv.URL+"/pay"), func(c *Config) { c.TLSConfig = cfg })
		if got.State == store.StateSucceeded || tg.hits.Load() != 0 {
			t.Errorf("%s: %s after %d requests at the target, want nothing through", name, got.State, tg.hits.Load())
		}
	}
	// A MinVersion below TLS 1.2 is raised: a server that speaks at most
	// TLS 1.1 gets nothing.
	old := newTLSTarget(t, nil, func(s *httptest.Server) {
		mtls(s)
		s.TLS.MinVersion, s.TLS.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	})
	low := full.Clone()
	low.MinVersion = tls.VersionTLS10
	if got := runJob(t, nil, tlsJob(old.srv.URL+"/pay"), func(c *Config) { c.TLSConfig = low }); got.State == store.StateSucceeded || old.hits.Load() != 0 {
		t.Errorf("TLS 1.1 server, MinVersion 1.0 asked: %s after %d requests, want nothing through", got.State, old.hits.Load())
	}
	// An answer lost after the POST: the status query goes out with the
	// same TLS configuration and settles the job.
	tg := newTLSTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = c.Close() // no answer
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"succeeded"}`)
	}, mtls)
	j := tlsJob(tg.srv.URL + "/pay")
	j.StatusURL = tg.srv.URL + "/pay?key={key}"
	got := runJob(t, nil, j, func(c *Config) { c.TLSConfig = full })
	if got.State != store.StateSucceeded || got.StatusQueries < 1 {
		t.Errorf("lost answer, status over mTLS: %s after %d status queries (%s), want succeeded after at least 1", got.State, got.StatusQueries, got.LastError)
	}
}

// Own transport through an HTTP proxy (viaProxy, net/http): the private CA
// and the client certificate reach the target behind the CONNECT tunnel.
func TestTLSConfigViaProxy(t *testing.T) {
	now := time.Now()
	serverCert, serverPool := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	cc, clientPool := clientCert(t)
	tg := newTLSTarget(t, nil, func(s *httptest.Server) {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientPool}
	})
	p := newFakeProxy(t)
	d := h1.New(viaProxy(transportOptions(2, 2, nil, &tls.Config{RootCAs: serverPool, Certificates: []tls.Certificate{cc}}), p.URL()))
	got := runJob(t, d, tlsJob(tg.srv.URL+"/pay"))
	if got.State != store.StateSucceeded || tg.hits.Load() != 1 || p.connects.Load() < 1 {
		t.Errorf("via proxy: %s, %d hits, %d CONNECTs (%s)", got.State, tg.hits.Load(), p.connects.Load(), got.LastError)
	}
}

// A TLSConfig whose NextProtos offers h2 (copied from another client, say)
// still offers HTTP/1.1 alone on every path. Found in a review: the
// net/http paths (NetHTTP mode, proxied requests) passed it unchanged, an
// h2 server picked h2, the HTTP/1.1 request went into an HTTP/2
// connection, and every attempt ended unknown after its bytes left.
func TestTLSConfigOffersHTTP1OnlyOnEveryPath(t *testing.T) {
	now := time.Now()
	serverCert, serverPool := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	h2 := func(s *httptest.Server) {
		s.EnableHTTP2 = true
		s.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}}
	}
	base := &tls.Config{RootCAs: serverPool, NextProtos: []string{"h2", "http/1.1"}}
	for _, c := range []struct {
		name string
		d    func() Doer
	}{
		{"own transport, direct", func() Doer { return newHTTPClient(2, 2, nil, base) }},
		{"NetHTTP", func() Doer { return newNetHTTPClient(2, 2, nil, base) }},
		{"own transport, via proxy", func() Doer {
			return h1.New(viaProxy(transportOptions(2, 2, nil, base), newFakeProxy(t).URL()))
		}},
	} {
		tg := newTLSTarget(t, nil, h2)
		j := tlsJob(tg.srv.URL + "/pay")
		v, res := classifyOnce(t, c.d(), j, 3*time.Second)
		if res.status != 201 {
			t.Errorf("%s: status %d, class %s, err %v; want 201 as on the direct path", c.name, res.status, v.Class, res.err)
		}
	}
}

// Config.TLSConfig is copied in New for the status checker as for the
// Doer: a change the caller makes afterwards (here InsecureSkipVerify, set
// on the config for another client) reaches neither. Found in a review:
// the checker kept the caller's pointer until its first query, and an
// untrusted status server was trusted.
func TestTLSConfigCopiedForTheCheckerAtNew(t *testing.T) {
	var hits atomic.Int64
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"succeeded"}`)
	}))
	defer untrusted.Close()
	base := &tls.Config{RootCAs: x509.NewCertPool()} // trusts nothing
	db, err := bolt.Open(t.TempDir()+"/r.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := New(db, Config{TLSConfig: base})
	base.InsecureSkipVerify = true // after New: the caller reuses its config
	hc := r.checker.(*statusquery.HTTPChecker)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a := hc.Check(ctx, statusquery.Query{Template: untrusted.URL + "/s?key={key}", Key: "k", JobID: "j", JobURL: untrusted.URL + "/pay"})
	if a.Outcome != statusquery.NoAnswer || hits.Load() != 0 {
		t.Errorf("status query to an untrusted server: %s (%s), %d hits; the attempts' copy (cloned in New) would refuse it", a.Outcome, a.Detail, hits.Load())
	}
}

// A user-supplied HTTPChecker with neither Doer nor TLSConfig gets
// Config.TLSConfig (runner.New): a lost answer is settled by a status query
// over mTLS (a review found this path untested).
func TestTLSConfigReachesAUserHTTPChecker(t *testing.T) {
	now := time.Now()
	serverCert, serverPool := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	cc, clientPool := clientCert(t)
	tg := newTLSTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"succeeded"}`)
	}, func(s *httptest.Server) {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientPool}
	})
	j := tlsJob(tg.srv.URL + "/pay")
	j.StatusURL = tg.srv.URL + "/pay?key={key}"
	got := runJob(t, nil, j, func(c *Config) {
		c.TLSConfig = &tls.Config{RootCAs: serverPool, Certificates: []tls.Certificate{cc}}
		c.HTTPChecker = &statusquery.HTTPChecker{Timeout: 2 * time.Second}
	})
	if got.State != store.StateSucceeded || got.StatusQueries < 1 {
		t.Errorf("user HTTPChecker without TLSConfig: %s after %d status queries (%s)", got.State, got.StatusQueries, got.LastError)
	}
}
