package runner_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
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

// leaseStore records the runner's lease calls.
type leaseStore struct {
	*bolt.DB
	mu         sync.Mutex
	registered []store.RunnerInfo
	beats      int
	ended      []string
}

func (l *leaseStore) Register(ctx context.Context, r store.RunnerInfo, now time.Time, ttl time.Duration) error {
	l.mu.Lock()
	l.registered = append(l.registered, r)
	l.mu.Unlock()
	return l.DB.Register(ctx, r, now, ttl)
}

func (l *leaseStore) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	l.mu.Lock()
	l.beats++
	l.mu.Unlock()
	return l.DB.Heartbeat(ctx, id, now, ttl)
}

func (l *leaseStore) Deregister(ctx context.Context, id string) error {
	l.mu.Lock()
	l.ended = append(l.ended, id)
	l.mu.Unlock()
	return l.DB.Deregister(ctx, id)
}

// Run registers the runner's lease with its id and workers (a store sizes
// its commit batches by them), keeps it alive while it runs and ends it
// when it returns; the job it claimed names it as owner.
func TestRunHoldsALease(t *testing.T) {
	tg := statusTarget(t, http.StatusCreated)
	db := openStore(t)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	ls := &leaseStore{DB: db}
	cfg := testConfig(t)
	cfg.Workers = 7
	cfg.ID = "runner-under-test"
	cfg.LeaseTTL = 90 * time.Millisecond
	cfg.UntilIdle = true
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	r := runner.New(ls, cfg)
	if r.ID() != "runner-under-test" {
		t.Fatalf("ID() = %q", r.ID())
	}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.registered) != 1 || ls.registered[0].ID != "runner-under-test" || ls.registered[0].Workers != 7 || ls.registered[0].PID == 0 {
		t.Errorf("registered %+v; want one lease for runner-under-test with 7 workers and a pid", ls.registered)
	}
	if len(ls.ended) != 1 || ls.ended[0] != "runner-under-test" {
		t.Errorf("ended %v; want the lease of runner-under-test", ls.ended)
	}
	if leases, _ := db.Leases(); len(leases) != 0 {
		t.Errorf("leases after Run: %+v; want none", leases)
	}
	if got, _ := db.Get(j.ID); got.Owner != "runner-under-test" || got.State != store.StateSucceeded {
		t.Errorf("job after Run: %s, owner %q; want succeeded, owner runner-under-test", got.State, got.Owner)
	}
	if tg.N() != 1 {
		t.Errorf("target saw %d requests, want 1", tg.N())
	}
}
