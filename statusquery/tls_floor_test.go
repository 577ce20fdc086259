package statusquery

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// HTTPChecker.TLSConfig's MinVersion below TLS 1.2 is raised: a status
// server speaking at most TLS 1.1 gets no query (a review found this
// untested).
func TestCheckerTLS12Floor(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"status":"succeeded"}`)
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	srv.StartTLS()
	defer srv.Close()
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := &HTTPChecker{TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a := c.Check(ctx, Query{Template: srv.URL + "/s?key={key}", Key: "k", JobID: "j"})
	if a.HTTPStatus != 0 || a.Outcome != NoAnswer {
		t.Errorf("TLS 1.1 status server: %s %d (%s); want no answer", a.Outcome, a.HTTPStatus, a.Detail)
	}
}
