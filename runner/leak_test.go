package runner_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// TestNoLeakAfterManyAttempts sends 1,000 attempts to a target answering
// 503 (declared no-effect) with a body longer than the body limit.
// Connections must be reused, which only happens when every response body
// is drained and closed, and no goroutine may outlive the run.
//
// It is not parallel: it counts the process's goroutines.
func TestNoLeakAfterManyAttempts(t *testing.T) {
	const (
		workers     = 16
		jobs        = 100
		maxAttempts = 10
	)
	db := openStore(t)

	var (
		received atomic.Int64
		newConns atomic.Int64
		closed   atomic.Int64
	)
	allClosed := make(chan struct{}, 1)
	body := strings.Repeat("x", 2048) // over the body limit below: kept in part, the rest drained
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			newConns.Add(1)
		case http.StateClosed, http.StateHijacked:
			if closed.Add(1) == newConns.Load() {
				select {
				case allClosed <- struct{}{}:
				default:
				}
			}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	client := runner.NewHTTPClient(workers)
	cfg := testConfig(t)
	cfg.Workers = workers
	cfg.Doer = client
	cfg.BodyLimit = 1024
	cfg.Backoff = runner.Backoff{Base: 100 * time.Microsecond, Cap: time.Millisecond}

	var all []*store.Job
	for range jobs {
		all = append(all, newJob(srv.URL, func(j *store.Job) {
			j.MaxAttempts = maxAttempts
			j.NoEffectStatuses = []int{503}
		}))
	}
	enqueue(t, db, all...)

	runtime.GC()
	before := runtime.NumGoroutine()
	runIdleWithin(t, db, cfg, 45*time.Second) // fsync-bound; slow on a busy machine

	if n := received.Load(); n != jobs*maxAttempts {
		t.Fatalf("target received %d requests, want %d", n, jobs*maxAttempts)
	}
	for _, j := range all {
		if got := getJob(t, db, j.ID); got.State != store.StateFailed || got.Attempts != maxAttempts {
			t.Fatalf("job %s: %s after %d attempts, want failed after %d", got.ID, got.State, got.Attempts, maxAttempts)
		}
	}
	// Reused connections: at most one per worker, plus a little for a dial
	// racing a connection that just became idle.
	if n := newConns.Load(); n > workers+2 {
		t.Errorf("target accepted %d connections for %d attempts by %d workers, want ≤ %d (bodies not drained?)", n, jobs*maxAttempts, workers, workers+2)
	}

	client.CloseIdleConnections()
	timeout := time.After(5 * time.Second)
	for closed.Load() != newConns.Load() {
		select {
		case <-allClosed:
		case <-timeout:
			t.Fatalf("connections still open after CloseIdleConnections: %d new, %d closed", newConns.Load(), closed.Load())
		}
	}
	// Goroutines wind down asynchronously after their connection closes;
	// give them a bounded moment.
	const slack = 3
	after := runtime.NumGoroutine()
	for i := 0; i < 100 && after > before+slack; i++ {
		time.Sleep(10 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if after > before+slack {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutines: %d before, %d after the run, want ≤ %d\n%s", before, after, before+slack, buf)
	}
}
