package runner

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

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
