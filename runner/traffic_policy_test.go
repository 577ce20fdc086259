package runner_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// A host whose own policy sets only a settle window (or is left empty
// by a pause and a resume) is still held to the default policy's
// concurrency: its own policy fills in only what it sets.
func TestTrafficDefaultFillsOwnPolicy(t *testing.T) {
	var mu sync.Mutex
	inflight, peak := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the target's own work
		mu.Lock()
		inflight--
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	db := openStore(t)
	host := store.HostOf(srv.URL)
	setPolicy(t, db, store.DefaultHost, func(p *store.HostPolicy) { p.Concurrency = 2 })
	setPolicy(t, db, host, func(p *store.HostPolicy) { p.Settle = 6 * time.Second })
	for range 40 {
		enqueue(t, db, defaultJob(srv.URL))
	}
	cfg := scenarioConfig(t)
	cfg.StartupSpread = time.Millisecond // every worker at once
	runIdleWithin(t, db, cfg, 30*time.Second)
	if st := countStates(t, db); st[store.StateSucceeded] != 40 {
		t.Errorf("%d of 40 jobs succeeded", st[store.StateSucceeded])
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("peak in flight %d", peak)
	if peak > 2 {
		t.Errorf("%d requests in flight at once, want at most the default policy's 2", peak)
	}
}
