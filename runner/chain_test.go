package runner_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// chainCounter counts the runner's claims: chained to an outcome write,
// or taken by a claim round.
type chainCounter struct {
	*bolt.DB
	chained, rounds atomic.Int64
	// afterStop counts chaining FinishClaim calls begun after stopped
	// was set.
	stopped   atomic.Bool
	afterStop atomic.Int64
}

func (c *chainCounter) FinishClaim(ctx context.Context, cl store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if c.stopped.Load() && next != nil {
		c.afterStop.Add(1)
	}
	j, nc, err := c.DB.FinishClaim(ctx, cl, fn, next)
	if nc != nil {
		c.chained.Add(1)
	}
	return j, nc, err
}

func (c *chainCounter) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	cs, err := c.DB.ClaimDue(ctx, req)
	c.rounds.Add(int64(len(cs)))
	return cs, err
}

// enqueueN enqueues n jobs that POST to url.
func enqueueN(t *testing.T, db *bolt.DB, url string, n int) []*store.Job {
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
func wantSucceededOnce(t *testing.T, tg *target, db *bolt.DB, list []*store.Job) {
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
func TestChainedClaims(t *testing.T) {
	tg := statusTarget(t, http.StatusCreated)
	db := openStore(t)
	const jobs = 200
	list := enqueueN(t, db, tg.URL(), jobs)
	cc := &chainCounter{DB: db}
	runIdleOn(t, cc, testConfig(t))
	wantSucceededOnce(t, tg, db, list)
	ch, rd := cc.chained.Load(), cc.rounds.Load()
	if ch+rd != jobs {
		t.Errorf("claims: %d chained + %d by rounds = %d, want exactly %d (one per job)", ch, rd, ch+rd, jobs)
	}
	if ch < jobs/2 {
		t.Errorf("only %d of %d claims were chained to an outcome write, want most", ch, jobs)
	}
}

// Once Run is stopping, outcome writes claim nothing more: no job is left
// claimed (running) that no worker will work.
func TestNoChainedClaimsAfterStop(t *testing.T) {
	tg := newConnCounter(t, 2*time.Millisecond, 0)
	db := openStore(t)
	const jobs = 100
	enqueueN(t, db, tg.srv.URL, jobs)
	cc := &chainCounter{DB: db}
	cfg := testConfig(t)
	cfg.UntilIdle = false
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
	*bolt.DB
	calls atomic.Int64
}

func (f *failChain) FinishClaim(ctx context.Context, c store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if next == nil {
		return f.DB.FinishClaim(ctx, c, fn, nil)
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
	runIdleOn(t, fc, cfg)
	if fc.calls.Load() == 0 {
		t.Fatal("no outcome write tried to chain a claim; the test proves nothing")
	}
	wantSucceededOnce(t, tg, db, list)
}
