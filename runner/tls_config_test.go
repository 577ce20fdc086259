package runner

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
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
