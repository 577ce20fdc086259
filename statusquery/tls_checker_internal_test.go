package statusquery

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
)

func tlsChecker(pool any) *HTTPChecker {
	c := &HTTPChecker{Timeout: 500 * time.Millisecond}
	c.doer()
	if pool != nil {
		c.client.Transport.(*http.Transport).TLSClientConfig = pool.(*tls.Config).Clone()
	}
	return c
}

func TestCheckerTLS(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/gone/k1":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"not found"}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status":"succeeded"}`))
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	trust := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	q := func(u string) Query {
		return Query{JobID: "j1", Key: "k1", JobMethod: "POST", JobURL: srv.URL + "/p", Template: u}
	}

	a := tlsChecker(trust).Check(context.Background(), q(srv.URL+"/ok/{key}"))
	t.Logf("trusted 200: %s %d err=%v", a.Outcome, a.HTTPStatus, a.Err)
	if a.Outcome != FoundSucceeded {
		t.Error(a.Outcome)
	}
	a = tlsChecker(trust).Check(context.Background(), q(srv.URL+"/gone/{key}"))
	t.Logf("trusted 404: %s", a.Outcome)
	if a.Outcome != NotFound {
		t.Error(a.Outcome)
	}
	h := hits.Load()
	a = tlsChecker(nil).Check(context.Background(), q(srv.URL+"/gone/{key}"))
	t.Logf("unknown CA: %s %q %v", a.Outcome, a.Detail, a.Err)
	if a.Outcome != NoAnswer || hits.Load() != h {
		t.Error(a.Outcome)
	}
	a = tlsChecker(trust).Check(context.Background(), q(strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/gone/{key}"))
	t.Logf("wrong host: %s %v", a.Outcome, a.Err)
	if a.Outcome != NoAnswer {
		t.Error(a.Outcome)
	}
	// plain HTTP on an https URL
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	a = tlsChecker(trust).Check(context.Background(), q(strings.Replace(plain.URL, "http://", "https://", 1)+"/gone/{key}"))
	t.Logf("plain on https: %s %v", a.Outcome, a.Err)
	if a.Outcome != NoAnswer {
		t.Error(a.Outcome)
	}
	// handshake stall: connections held open, never answered
	ln := loopback.Serve(t, func(net.Conn) { <-t.Context().Done() })
	start := time.Now()
	a = tlsChecker(trust).Check(context.Background(), q("https://"+ln.Addr().String()+"/gone/{key}"))
	t.Logf("stall: %s %q %v after %v", a.Outcome, a.Detail, a.Err, time.Since(start))
	if a.Outcome != NoAnswer || time.Since(start) > 2*time.Second {
		t.Error(a.Outcome)
	}
	// closes after handshake
	ln2 := loopback.Serve(t, func(c net.Conn) {
		tc := tls.Server(c, &tls.Config{Certificates: srv.TLS.Certificates})
		if tc.Handshake() == nil {
			tc.Close()
		}
	})
	a = tlsChecker(trust).Check(context.Background(), q("https://"+ln2.Addr().String()+"/gone/{key}"))
	t.Logf("closed after handshake: %s %v", a.Outcome, a.Err)
	if a.Outcome != NoAnswer {
		t.Error(a.Outcome)
	}
}
