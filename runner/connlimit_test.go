package runner_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// connCounter is a target that counts, at the server, the requests in
// progress at once and the TCP connections it accepted.
type connCounter struct {
	srv            *httptest.Server
	inFlight, peak atomic.Int64
	conns          atomic.Int64
	creates        atomic.Int64
	crowd          chan struct{} // closed when barrier requests are in progress at once
	crowdOnce      sync.Once
}

// newConnCounter starts a connCounter whose requests each take hold (a slow
// target) or, with barrier > 0, wait until barrier requests are in progress
// at once (at most 5 s).
func newConnCounter(t *testing.T, hold time.Duration, barrier int64) *connCounter {
	t.Helper()
	cc := &connCounter{crowd: make(chan struct{})}
	cc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cc.inFlight.Add(1)
		defer cc.inFlight.Add(-1)
		for {
			p := cc.peak.Load()
			if n <= p || cc.peak.CompareAndSwap(p, n) {
				break
			}
		}
		if barrier > 0 {
			if n >= barrier {
				cc.crowdOnce.Do(func() { close(cc.crowd) })
			}
			select {
			case <-cc.crowd:
			case <-time.After(5 * time.Second):
			}
		} else {
			time.Sleep(hold)
		}
		cc.creates.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	cc.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cc.conns.Add(1)
		}
	}
	cc.srv.Start()
	t.Cleanup(cc.srv.Close)
	return cc
}

// The default Doer opens at most MaxConnsPerHost connections to a host;
// workers beyond it wait for a free one, and every job still ends
// succeeded, created once.
func TestMaxConnsPerHostCapsConnectionsAtTheServer(t *testing.T) {
	cc := newConnCounter(t, 20*time.Millisecond, 0)
	db := openStore(t)
	const jobs = 60
	var list []*store.Job
	for range jobs {
		list = append(list, newJob(cc.srv.URL))
	}
	enqueue(t, db, list...)
	cfg := testConfig(t)
	cfg.Doer = nil // the default client, built from MaxConnsPerHost
	cfg.Workers = 20
	cfg.MaxConnsPerHost = 3
	runIdle(t, db, cfg)
	if got := cc.creates.Load(); got != jobs {
		t.Fatalf("target saw %d creates, want %d", got, jobs)
	}
	if p := cc.peak.Load(); p > 3 {
		t.Errorf("target saw %d requests at once, want at most MaxConnsPerHost=3", p)
	}
	if c := cc.conns.Load(); c > 3 {
		t.Errorf("target accepted %d connections, want at most 3", c)
	}
	for _, j := range list {
		wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	}
}

// Without a cap (negative), the same run uses more connections than 3:
// the control that shows the cap above is what limits them.
func TestMaxConnsPerHostNegativeMeansNoLimit(t *testing.T) {
	// Requests wait until 4 are in progress at once: without a cap they
	// get there, and the test does not depend on timing.
	cc := newConnCounter(t, 0, 4)
	db := openStore(t)
	var list []*store.Job
	for range 20 {
		list = append(list, newJob(cc.srv.URL))
	}
	enqueue(t, db, list...)
	cfg := testConfig(t)
	cfg.Doer = nil
	cfg.Workers = 10
	cfg.MaxConnsPerHost = -1
	runIdle(t, db, cfg)
	if p := cc.peak.Load(); p <= 3 {
		t.Errorf("with no limit the target saw at most %d requests at once, want more than 3 (10 workers)", p)
	}
	if got := cc.creates.Load(); got != 20 {
		t.Fatalf("target saw %d creates, want 20", got)
	}
}
