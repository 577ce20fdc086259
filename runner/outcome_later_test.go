package runner_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// laterStore is a bbolt store with store.FinishLater whose queued
// finishes the test commits (flush) or fails (fail) when it chooses, or,
// with auto, as soon as they are queued.
type laterStore struct {
	*bolt.DB
	auto   bool
	mu     sync.Mutex
	queued []laterFinish
	n      atomic.Int64 // finishes queued so far
}

type laterFinish struct {
	c    store.Claim
	j    *store.Job // the outcome as fn made it
	done func(*store.Job, error)
}

// FinishClaimLater calls fn now, as the contract says, and queues the
// outcome it made.
func (s *laterStore) FinishClaimLater(c store.Claim, fn store.TransitionFunc, done func(*store.Job, error)) error {
	j := c.Job.Clone()
	if err := fn(j); err != nil {
		return err
	}
	f := laterFinish{c: c, j: j, done: done}
	s.n.Add(1)
	if s.auto {
		go s.commit(f)
		return nil
	}
	s.mu.Lock()
	s.queued = append(s.queued, f)
	s.mu.Unlock()
	return nil
}

func (s *laterStore) commit(f laterFinish) {
	j, _, err := s.DB.FinishClaim(context.Background(), f.c, func(j *store.Job) error {
		*j = *f.j.Clone()
		return nil
	}, nil)
	f.done(j, err)
}

func (s *laterStore) take() []laterFinish {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queued
	s.queued = nil
	return q
}

// flush commits the queued finishes and acknowledges them.
func (s *laterStore) flush() {
	for _, f := range s.take() {
		s.commit(f)
	}
}

// fail acknowledges the queued finishes with err, committing none.
func (s *laterStore) fail(err error) {
	for _, f := range s.take() {
		f.done(nil, err)
	}
}

// waitQueued waits until n finishes were queued.
func (s *laterStore) waitQueued(t *testing.T, n int64) {
	t.Helper()
	for end := time.Now().Add(runTimeout); s.n.Load() < n; {
		if time.Now().After(end) {
			t.Fatalf("%d finishes queued after %s; want %d", s.n.Load(), runTimeout, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// startRun runs r until ctx ends and returns Run's result channel.
func startRun(ctx context.Context, r *runner.Runner) <-chan error {
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	return ran
}

func wantRunning(t *testing.T, ran <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ran:
		t.Fatalf("Run returned (%v) %s", err, what)
	case <-time.After(100 * time.Millisecond):
	}
}

func waitRun(t *testing.T, ran <-chan error) error {
	t.Helper()
	select {
	case err := <-ran:
		return err
	case <-time.After(runTimeout):
		t.Fatalf("Run did not return within %s", runTimeout)
		return nil
	}
}

// TestWriteLaterAcknowledgementEndsTheJob: with a store that commits
// outcomes later, a job sent and its outcome queued is still the
// runner's: no OnWrite, still running in the store, and an UntilIdle Run
// goes on, until the commit is acknowledged.
func TestWriteLaterAcknowledgementEndsTheJob(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	ls := &laterStore{DB: db}
	tg := statusTarget(t, http.StatusCreated)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	var writes atomic.Int64
	cfg.OnWrite = func(*store.Job) { writes.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	ran := startRun(ctx, runner.New(ls, cfg))

	ls.waitQueued(t, 1)
	wantRunning(t, ran, "with an outcome queued and not acknowledged")
	if n := writes.Load(); n != 0 {
		t.Errorf("OnWrite called %d times before the outcome's commit; want 0", n)
	}
	wantState(t, getJob(t, db, j.ID), store.StateRunning)

	ls.flush()
	if err := waitRun(t, ran); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	if n := writes.Load(); n != 1 {
		t.Errorf("OnWrite called %d times; want 1, after the commit", n)
	}
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d requests; want 1", n)
	}
}

// TestWriteLaterStopWaitsForAcknowledgement: Run, stopped, returns only
// once every queued outcome is acknowledged, also past ShutdownGrace.
func TestWriteLaterStopWaitsForAcknowledgement(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	ls := &laterStore{DB: db}
	tg := statusTarget(t, http.StatusCreated)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.UntilIdle = false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := startRun(ctx, runner.New(ls, cfg))

	ls.waitQueued(t, 1)
	cancel()
	time.Sleep(cfg.ShutdownGrace)
	wantRunning(t, ran, "stopped, before its queued outcome was acknowledged")
	ls.flush()
	if err := waitRun(t, ran); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
}

// TestWriteLaterLostOutcomeIsAskedNotResent: an outcome queued and never
// committed (the store failed, as a crash loses it) leaves the job
// running under its claim; the next runner rescues it into unknown and
// asks the target's status endpoint, and the target receives the POST
// once.
func TestWriteLaterLostOutcomeIsAskedNotResent(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	ls := &laterStore{DB: db}
	var posts, queries atomic.Int64
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		if r.Method == http.MethodGet {
			queries.Add(1)
			w.WriteHeader(http.StatusOK) // found: it took effect
			return
		}
		posts.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/status/{key}" })
	enqueue(t, db, j)
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	ran := startRun(ctx, runner.New(ls, cfg))

	ls.waitQueued(t, 1)
	ls.fail(store.ErrFailed)
	if err := waitRun(t, ran); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("Run after its store failed: %v; want ErrFailed", err)
	}
	wantState(t, getJob(t, db, j.ID), store.StateRunning)

	runIdle(t, db, testConfig(t))
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	if n := posts.Load(); n != 1 {
		t.Errorf("target received %d POSTs; want 1 (the lost outcome is asked about, not resent)", n)
	}
	if n := queries.Load(); n < 1 {
		t.Errorf("target received %d status queries; want at least 1", n)
	}
}

// TestWriteLaterClaimsAhead: with outcomes committed later, a runner
// holds up to Workers+ClaimAhead jobs (claimed ahead of a free worker),
// while no more than Workers are sent at once.
func TestWriteLaterClaimsAhead(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	ls := &laterStore{DB: db, auto: true}
	release := make(chan struct{})
	var sending, most atomic.Int64
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		n := sending.Add(1)
		defer sending.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		w.WriteHeader(http.StatusCreated)
	})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)
	for range 10 {
		enqueue(t, db, newJob(tg.URL()))
	}
	cfg := testConfig(t)
	cfg.Workers, cfg.ClaimAhead = 2, 3
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	ran := startRun(ctx, runner.New(ls, cfg))

	running := func() int64 {
		st, err := db.Stats()
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return st[store.StateRunning]
	}
	for end := time.Now().Add(runTimeout); running() < 5 || tg.N() < 2; {
		if time.Now().After(end) {
			t.Fatalf("%d jobs running, %d sent; want 5 held (2 workers + 3 ahead), 2 sent", running(), tg.N())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n, s := running(), tg.N(); n != 5 || s != 2 {
		t.Errorf("held %d jobs, sent %d, with both workers busy; want 5 and 2", n, s)
	}
	done()
	if err := waitRun(t, ran); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d sends at once; want at most Workers (2)", m)
	}
	if n := tg.N(); n != 10 {
		t.Errorf("target received %d requests; want 10", n)
	}
	if st, _ := db.Stats(); st[store.StateSucceeded] != 10 {
		t.Errorf("stats %v; want 10 succeeded", st)
	}
}

// TestWriteLaterStopSendsNoJobClaimedAhead: a stopped Run sends none of
// the jobs it claimed ahead; each ends as an attempt canceled before it
// was sent, pending again and not counted against its budget.
func TestWriteLaterStopSendsNoJobClaimedAhead(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	ls := &laterStore{DB: db, auto: true}
	release := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		<-release
		w.WriteHeader(http.StatusCreated)
	})
	var ids []string
	for range 4 {
		j := newJob(tg.URL())
		enqueue(t, db, j)
		ids = append(ids, j.ID)
	}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.Workers, cfg.ClaimAhead = 1, 3
	cfg.ShutdownGrace = runTimeout
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := startRun(ctx, runner.New(ls, cfg))
	for end := time.Now().Add(runTimeout); ; time.Sleep(time.Millisecond) {
		st, err := db.Stats()
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		if st[store.StateRunning] == 4 && tg.N() == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("stats %v, %d sent; want 4 running (1 sending, 3 ahead), 1 sent", st, tg.N())
		}
	}
	cancel()
	done()
	if err := waitRun(t, ran); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d requests; want 1, the job sent before the stop", n)
	}
	succeeded, pending := 0, 0
	for _, id := range ids {
		j := getJob(t, db, id)
		switch j.State {
		case store.StateSucceeded:
			succeeded++
		case store.StatePending:
			pending++
			if left := j.MaxAttempts - (j.Attempts - j.AttemptBase); left != j.MaxAttempts {
				t.Errorf("job %s claimed ahead, not sent: %d attempts left of %d; want the canceled one not counted", id, left, j.MaxAttempts)
			}
		default:
			t.Errorf("job %s: %s; want succeeded (sent) or pending (claimed ahead, not sent)", id, j.State)
		}
	}
	if succeeded != 1 || pending != 3 {
		t.Errorf("%d succeeded, %d pending; want 1 and 3", succeeded, pending)
	}
}
