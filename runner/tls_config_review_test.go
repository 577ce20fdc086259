package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

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
	d := newHTTPClient(2, 2, nil, &tls.Config{RootCAs: serverPool, Certificates: []tls.Certificate{cc}})
	tr := d.(directDoer).t
	tr.proxy, tr.viaProxy.Proxy = http.ProxyURL(p.URL()), http.ProxyURL(p.URL())
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
			p := newFakeProxy(t)
			d := newHTTPClient(2, 2, nil, base)
			tr := d.(directDoer).t
			tr.proxy, tr.viaProxy.Proxy = http.ProxyURL(p.URL()), http.ProxyURL(p.URL())
			return d
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
	db, err := store.Open(t.TempDir()+"/r.db", nil)
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
