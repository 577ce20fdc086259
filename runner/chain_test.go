package runner_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// chainCounter counts the runner's claims: chained to an outcome write,
// or taken by a claim round.
type chainCounter struct {
	*store.DB
	chained, rounds atomic.Int64
	// afterStop counts chaining FinishClaimNext calls begun after stopped
	// was set.
	stopped   atomic.Bool
	afterStop atomic.Int64
}

func (c *chainCounter) FinishClaimNext(ctx context.Context, cl store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if c.stopped.Load() && next != nil {
		c.afterStop.Add(1)
	}
	j, nc, err := c.DB.FinishClaimNext(ctx, cl, fn, next)
	if nc != nil {
		c.chained.Add(1)
	}
	return j, nc, err
}

// StartFinishClaim counts as FinishClaimNext does. It waits for the
// commit before it returns, so a worker's writes do not overlap its sends
// here (TestPrefetchOverlapsCommitAndSend proves they do with the store
// itself); what is counted is the claims the pipelined path asks for.
func (c *chainCounter) StartFinishClaim(ctx context.Context, cl store.Claim, fn store.TransitionFunc, next *store.NextClaim) *store.PendingFinish {
	if c.stopped.Load() && next != nil {
		c.afterStop.Add(1)
	}
	p := c.DB.StartFinishClaim(ctx, cl, fn, next)
	_, cs, _ := p.Wait()
	c.chained.Add(int64(len(cs)))
	return p
}

func (c *chainCounter) ClaimDueSkip(ctx context.Context, s store.State, now time.Time, limit int, skip func(id string) bool, prepare store.ClaimFunc) ([]store.Claim, error) {
	cs, err := c.DB.ClaimDueSkip(ctx, s, now, limit, skip, prepare)
	c.rounds.Add(int64(len(cs)))
	return cs, err
}

// enqueueWithStatus enqueues n jobs that POST to url and have a status
// URL there, so a worker may hold them (Config.Prefetch).
func enqueueWithStatus(t *testing.T, db *store.DB, url string, n int) []*store.Job {
	t.Helper()
	var list []*store.Job
	for range n {
		list = append(list, newJob(url, func(j *store.Job) { j.StatusURL = url + "/payments/{key}" }))
	}
	enqueue(t, db, list...)
	return list
}

// enqueueN enqueues n jobs that POST to url.
func enqueueN(t *testing.T, db *store.DB, url string, n int) []*store.Job {
	t.Helper()
	var list []*store.Job
	for range n {
		list = append(list, newJob(url))
	}
	enqueue(t, db, list...)
	return list
}

// runIdleOn runs a runner over s until no job is left to work.
func runIdleOn(t *testing.T, s runner.Store, cfg runner.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cfg.UntilIdle = true
	if err := runner.New(s, cfg).Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v); want idle within %s", err, ctx.Err(), runTimeout)
	}
}

// wantSucceededOnce fails the test unless the target saw each job's key
// exactly once and each job ended succeeded.
func wantSucceededOnce(t *testing.T, tg *target, db *store.DB, list []*store.Job) {
	t.Helper()
	perKey := map[string]int{}
	for _, r := range tg.received() {
		perKey[r.Header.Get("Idempotency-Key")]++
	}
	for _, j := range list {
		if n := perKey[j.Key]; n != 1 {
			t.Errorf("target saw key %s %d times, want once", j.Key, n)
		}
		wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	}
}

// A worker's outcome write claims its next job: most jobs of a backlog are
// claimed that way, each job is claimed exactly once, and the target sees
// every key exactly once.
// The same holds with a worker holding prefetched jobs (the default) and
// without (each worker waits for its outcome commit).
func TestChainedClaims(t *testing.T) {
	for _, prefetch := range []int{-1, 1, 3} {
		t.Run(fmt.Sprintf("prefetch=%d", prefetch), func(t *testing.T) {
			tg := statusTarget(t, http.StatusCreated)
			db := openStore(t)
			const jobs = 200
			list := enqueueWithStatus(t, db, tg.URL(), jobs)
			cc := &chainCounter{DB: db}
			cfg := testConfig(t)
			cfg.Prefetch = prefetch
			runIdleOn(t, cc, cfg)
			wantSucceededOnce(t, tg, db, list)
			ch, rd := cc.chained.Load(), cc.rounds.Load()
			if ch+rd != jobs {
				t.Errorf("claims: %d chained + %d by rounds = %d, want exactly %d (one per job)", ch, rd, ch+rd, jobs)
			}
			if ch < jobs/2 {
				t.Errorf("only %d of %d claims were chained to an outcome write, want most", ch, jobs)
			}
		})
	}
}

// Once Run is stopping, outcome writes claim nothing more: no job is left
// claimed (running) that no worker will work.
func TestNoChainedClaimsAfterStop(t *testing.T) {
	for _, prefetch := range []int{-1, 1} {
		t.Run(fmt.Sprintf("prefetch=%d", prefetch), func(t *testing.T) { testNoChainedClaimsAfterStop(t, prefetch) })
	}
}

// testNoChainedClaimsAfterStop is TestNoChainedClaimsAfterStop with
// Config.Prefetch set to prefetch: jobs a worker held when Run stopped are
// worked within the grace period, not left running.
func testNoChainedClaimsAfterStop(t *testing.T, prefetch int) {
	tg := newConnCounter(t, 2*time.Millisecond, 0)
	db := openStore(t)
	const jobs = 100
	enqueueWithStatus(t, db, tg.srv.URL, jobs)
	cc := &chainCounter{DB: db}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.Prefetch = prefetch
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var done atomic.Int64
	cfg.OnWrite = func(j *store.Job) {
		if j.State == store.StateSucceeded && done.Add(1) == 20 {
			cancel()
			cc.stopped.Store(true)
		}
	}
	if err := runner.New(cc, cfg).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cc.afterStop.Load(); n != 0 {
		t.Errorf("%d outcome writes tried to chain a claim after Run was stopped, want 0", n)
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st[store.StateRunning] != 0 || st[store.StateUnknown] != 0 {
		t.Errorf("after the stop: %v; want nothing running or unknown", st)
	}
	if got := st[store.StateSucceeded]; got != tg.creates.Load() || got+st[store.StatePending] != jobs {
		t.Errorf("after the stop: %d succeeded, %d pending, target saw %d creates; want succeeded = creates, succeeded + pending = %d",
			got, st[store.StatePending], tg.creates.Load(), jobs)
	}
}

// failChain is a store whose chained outcome writes fail as a failed
// commit does: nothing written, an error returned. Outcome writes alone
// go through.
type failChain struct {
	*store.DB
	calls atomic.Int64
}

func (f *failChain) FinishClaimNext(ctx context.Context, c store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if next == nil {
		return f.DB.FinishClaimNext(ctx, c, fn, nil)
	}
	f.calls.Add(1)
	return nil, nil, errDiskFull
}

var errDiskFull = errors.New("disk full")

// When the commit of an outcome and its chained claim fails, nothing of it
// happened: the worker writes the outcome again alone and sends nothing
// more; claim rounds take the other jobs. Every job ends succeeded, sent
// once.
func TestChainedClaimCommitFails(t *testing.T) {
	tg := statusTarget(t, http.StatusCreated)
	db := openStore(t)
	list := enqueueN(t, db, tg.URL(), 12)
	fc := &failChain{DB: db}
	cfg := testConfig(t)
	cfg.Workers = 2
	cfg.Prefetch = -1 // failChain fails FinishClaimNext; TestPrefetchCommitFails fails queued writes
	runIdleOn(t, fc, cfg)
	if fc.calls.Load() == 0 {
		t.Fatal("no outcome write tried to chain a claim; the test proves nothing")
	}
	wantSucceededOnce(t, tg, db, list)
}

// When commits fail while workers' outcome writes are queued (Prefetch),
// each write is tried again alone and lands: nothing is lost, nothing is
// sent twice, nothing stays running, and the claims the failed commits
// would have made were not made (claim rounds take those jobs).
func TestPrefetchCommitFails(t *testing.T) {
	tg := statusTarget(t, http.StatusCreated)
	var armed atomic.Bool
	var commits, failed atomic.Int64
	db, err := store.Open(filepath.Join(t.TempDir(), "idemrun.db"), &store.Options{CommitHook: func(int) error {
		// Once the jobs are stored, the runner's commits 20 to 39 fail
		// (batches and their ops run alone alike).
		if !armed.Load() {
			return nil
		}
		if n := commits.Add(1); n >= 20 && n < 40 {
			failed.Add(1)
			return errDiskFull
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	list := enqueueWithStatus(t, db, tg.URL(), 200)
	armed.Store(true)
	cfg := testConfig(t)
	cfg.Prefetch = 1
	runIdleOn(t, db, cfg)
	if failed.Load() == 0 {
		t.Fatal("no commit failed; the test proves nothing")
	}
	wantSucceededOnce(t, tg, db, list)
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st[store.StateSucceeded] != int64(len(list)) {
		t.Errorf("stats %v, want all %d succeeded", st, len(list))
	}
}

// With Prefetch a worker sends its next job while its last outcome write
// commits. One worker, four jobs: the first outcome write claims two jobs
// (the worker waits for it: it holds nothing yet); from the second on, the
// commit of job B's outcome is held until the target has received job C,
// which the worker can only send if it does not wait for that commit.
// Only jobs whose unknown outcome the runner settles by itself are held
// (here: with a status URL); without one, C waits for the commit, so a
// crash never leaves a person more jobs to check than were in flight.
func TestPrefetchOverlapsCommitAndSend(t *testing.T) {
	for _, withStatus := range []bool{true, false} {
		t.Run(fmt.Sprintf("status_url=%v", withStatus), func(t *testing.T) {
			overlapped := prefetchOverlap(t, withStatus)
			if withStatus && !overlapped {
				t.Error("job C was not sent while job B's outcome committed; want the commit and the send to overlap")
			}
			if !withStatus && overlapped {
				t.Error("job C (no status URL) was sent while job B's outcome committed; want it claimed only after, not held")
			}
		})
	}
}

// prefetchOverlap runs TestPrefetchOverlapsCommitAndSend's four jobs and
// reports whether job C was sent while job B's outcome commit was held.
func prefetchOverlap(t *testing.T, withStatus bool) bool {
	var received atomic.Int64
	third := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && received.Add(1) == 3 {
			close(third)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	wait := 5 * time.Second // overlap expected: the hold ends when C arrives
	if !withStatus {
		wait = 300 * time.Millisecond // C cannot arrive while the commit is held
	}
	var held, overlapped atomic.Bool
	db, err := store.Open(filepath.Join(t.TempDir(), "idemrun.db"), &store.Options{CommitHook: func(int) error {
		if received.Load() >= 2 && held.CompareAndSwap(false, true) {
			// The first commit after the second send: job B's outcome
			// and the claim of job D (the first one's was waited for
			// before B was sent). Job C may have been sent already.
			select {
			case <-third:
				overlapped.Store(true)
			case <-time.After(wait):
			}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var list []*store.Job
	for range 4 {
		list = append(list, newJob(srv.URL, func(j *store.Job) {
			if withStatus {
				j.StatusURL = srv.URL + "/payments/{key}"
			}
		}))
	}
	enqueue(t, db, list...)
	cfg := testConfig(t)
	cfg.Workers = 1
	cfg.Prefetch = 1
	runIdleOn(t, db, cfg)
	if !held.Load() {
		t.Fatal("no commit was held after the second send; the test proves nothing")
	}
	if n := received.Load(); n != int64(len(list)) {
		t.Errorf("target received %d requests, want %d", n, len(list))
	}
	for _, j := range list {
		wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	}
	return overlapped.Load()
}
