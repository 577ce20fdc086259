package runner_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
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

// A runner logs, at the default level, the pauses it finds as it starts
// and every pause, resume and policy change it picks up while it runs.
func TestTrafficLogsPolicyChanges(t *testing.T) {
	db := openStore(t)
	const host = "127.0.0.1:9"
	setPolicy(t, db, host, func(p *store.HostPolicy) { p.Paused, p.Note = true, "their outage" })
	logs := &signalBuffer{wrote: make(chan struct{}, 1)}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.PolicyReload = 10 * time.Millisecond
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.New(db, cfg).Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitLog := func(want ...string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			for _, l := range strings.Split(logs.String(), "\n") {
				if containsAll(l, want...) {
					return
				}
			}
			select {
			case <-logs.wrote:
			case <-deadline:
				t.Fatalf("no log line with %q:\n%s", want, logs.String())
			}
		}
	}
	waitLog("level=WARN", "host paused", "host="+host, `note="their outage"`)
	setPolicy(t, db, host, func(p *store.HostPolicy) { p.Paused = false })
	waitLog("level=INFO", "host resumed", "host="+host)
	setPolicy(t, db, host, func(p *store.HostPolicy) { p.Rate = 5 })
	waitLog("level=INFO", "host policy set", "host="+host, "rate=5")
}

// containsAll reports whether s holds every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// Pausing the default policy pauses every host without a policy of its
// own; a host with one (a rate alone) is not paused by it.
func TestTrafficDefaultPause(t *testing.T) {
	var own sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/own" {
			own.Done()
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got["/held"]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(other.Close)
	db := openStore(t)
	setPolicy(t, db, store.DefaultHost, func(p *store.HostPolicy) { p.Paused = true })
	setPolicy(t, db, store.HostOf(srv.URL), func(p *store.HostPolicy) { p.Rate = 1000 })
	own.Add(3)
	for range 3 {
		j := defaultJob(srv.URL)
		j.Request.URL = srv.URL + "/own"
		enqueue(t, db, j)
		enqueue(t, db, defaultJob(other.URL))
	}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.New(db, cfg).Run(ctx) }()
	ownDone := make(chan struct{})
	go func() { own.Wait(); close(ownDone) }()
	select {
	case <-ownDone:
	case <-time.After(10 * time.Second):
		t.Error("the host with a policy of its own was not sent to within 10 s")
	}
	// The held host's jobs were due beside these: had * not held them,
	// they would have been sent by now.
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got["/held"] != 0 {
		t.Errorf("%d requests to a host without a policy of its own while * is paused, want 0", got["/held"])
	}
	if st := countStates(t, db); st[store.StatePending] != 3 {
		t.Errorf("by state %v, want the held host's 3 jobs pending", st)
	}
}

// signalBuffer is a log that says on wrote when a line was written.
type signalBuffer struct {
	lockedBuffer
	wrote chan struct{}
}

func (b *signalBuffer) Write(p []byte) (int, error) {
	n, err := b.lockedBuffer.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default: // a signal is waiting already
	}
	return n, err
}
