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

// lostLease is a store whose lease heartbeats are refused from the first
// one on, as when a runner's lease expired and another runner rescued its
// jobs; from then on it refuses claims too, as the store does for an owner
// without a lease, and counts them.
type lostLease struct {
	*bolt.DB
	lost        atomic.Bool
	claimsAfter atomic.Int64
}

func (l *lostLease) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	l.lost.Store(true)
	return store.ErrLeaseLost
}

func (l *lostLease) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	if l.lost.Load() {
		l.claimsAfter.Add(1)
		return nil, store.ErrLeaseLost
	}
	return l.DB.ClaimDue(ctx, req)
}

// A runner whose heartbeat is refused stops claiming and stops: Run
// returns an error that says the lease was lost, the attempt in flight
// still ends and is recorded, and nothing is claimed after the loss.
func TestRunStopsWhenItsLeaseIsLost(t *testing.T) {
	tg, release := heldTarget(t)
	db := openStore(t)
	first := newJob(tg.URL())
	enqueue(t, db, first)
	ls := &lostLease{DB: db}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.LeaseTTL = 60 * time.Millisecond
	cfg.ShutdownGrace = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runner.New(ls, cfg).Run(ctx) }()
	// The first job is in flight when the first heartbeat is refused.
	waitFor(t, "the attempt in flight and a refused heartbeat", func() bool { return tg.N() > 0 && ls.lost.Load() })
	enqueue(t, db, newJob(tg.URL()))
	release()
	select {
	case err := <-errc:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Run after a lost lease = %v; want an error matching store.ErrLeaseLost", err)
		}
	case <-ctx.Done():
		t.Fatal("Run went on after its lease was lost")
	}
	// A claim round already under way when the beat was refused may still
	// ask (and be refused); the runner must not keep asking: it stops.
	if n := ls.claimsAfter.Load(); n > int64(runner.DefaultClaimRounds) {
		t.Errorf("%d claims asked for after the lease was lost; want at most the rounds already under way (%d)", n, runner.DefaultClaimRounds)
	}
	if got, _ := db.Get(first.ID); got.State != store.StateSucceeded {
		t.Errorf("the attempt in flight when the lease was lost ended %s; want its outcome recorded (succeeded)", got.State)
	}
	if tg.N() != 1 {
		t.Errorf("target saw %d requests; want 1 (nothing sent after the loss)", tg.N())
	}
}

// countingStore counts ClaimDue calls refused with ErrLeaseLost.
type countingStore struct {
	*bolt.DB
	refused atomic.Int64
}

func (s *countingStore) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	cs, err := s.DB.ClaimDue(ctx, req)
	if errors.Is(err, store.ErrLeaseLost) {
		s.refused.Add(1)
	}
	return cs, err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A machine suspended past the runner's lease (the clock jumps an hour):
// the store refuses the heartbeat and every claim with ErrLeaseLost, and
// Run stops with an error matching it; the attempt in flight, which no
// one rescued, is recorded.
func TestRunStopsWhenItsLeaseExpires(t *testing.T) {
	tg, release := heldTarget(t)
	db := openStore(t)
	clock := newFakeClock(clockStart)
	j := newJob(tg.URL(), at(clockStart))
	enqueue(t, db, j)
	cs := &countingStore{DB: db}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.Now = clock.Now
	cfg.LeaseTTL = 90 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runner.New(cs, cfg).Run(ctx) }()
	waitFor(t, "the attempt to reach the target", func() bool { return tg.N() == 1 })

	clock.Advance(time.Hour) // the machine was suspended for an hour
	release()
	select {
	case err := <-errc:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Run = %v; want an error matching ErrLeaseLost", err)
		}
	case <-time.After(3 * time.Second):
		cancel()
		err := <-errc
		t.Errorf("Run went on for 3 s after its lease was lost (%d claims refused with ErrLeaseLost meanwhile); after cancel it returned %v", cs.refused.Load(), err)
	}
	if got := getJob(t, db, j.ID); got.State != store.StateSucceeded {
		t.Errorf("in-flight job ended %s; want succeeded (nobody rescued it, its outcome is recorded)", got.State)
	}
}

// rescueAfterBeat pauses the clock between a heartbeat and the rescue the
// runner runs after it (a GC pause, a descheduled goroutine).
type rescueAfterBeat struct {
	*bolt.DB
	clock   *fakeClock
	pause   time.Duration
	once    atomic.Bool
	armed   atomic.Bool
	rescued atomic.Bool // a rescue ran after the paused beat
}

func (s *rescueAfterBeat) Rescue(ctx context.Context, now time.Time, fn func(j *store.Job)) (int, error) {
	n, err := s.DB.Rescue(ctx, now, fn)
	if s.once.Load() {
		s.rescued.Store(true)
	}
	return n, err
}

func (s *rescueAfterBeat) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	err := s.DB.Heartbeat(ctx, id, now, ttl)
	if err == nil && s.armed.Load() && s.once.CompareAndSwap(false, true) {
		s.clock.Advance(s.pause)
	}
	return err
}

// The rescue after a heartbeat judges leases at that beat's clock
// reading: a pause longer than the lease between the two (a GC pause, a
// descheduled goroutine) must not make the runner rescue its own job in
// flight and then lose the outcome the target gave to the fence.
func TestHeartbeatRescueSparesOwnJobs(t *testing.T) {
	tg, release := heldTarget(t)
	db := openStore(t)
	clock := newFakeClock(clockStart)
	j := newJob(tg.URL(), at(clockStart))
	enqueue(t, db, j)
	s := &rescueAfterBeat{DB: db, clock: clock, pause: time.Second}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.Now = clock.Now
	cfg.LeaseTTL = 300 * time.Millisecond // on the fake clock too
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runner.New(s, cfg).Run(ctx) }()
	waitFor(t, "the attempt to reach the target", func() bool { return tg.N() == 1 })
	s.armed.Store(true)
	waitFor(t, "the rescue after the paused beat", func() bool { return s.rescued.Load() })
	mid := getJob(t, db, j.ID)
	release()
	waitFor(t, "the outcome written", func() bool { return getJob(t, db, j.ID).State != store.StateRunning })
	cancel()
	<-errc
	got := getJob(t, db, j.ID)
	if mid.State != store.StateRunning || got.State != store.StateSucceeded {
		t.Errorf("job while its attempt was in flight: %s (fence %d); after the target answered 201: %s, %q; want running, then succeeded",
			mid.State, mid.Fence, got.State, got.LastError)
	}
}

// unreachableAfterLoss refuses heartbeats (the lease is lost) and, from
// then on, fails every outcome write with an error that does not stop a
// runner by itself, as a store that cannot be reached does.
type unreachableAfterLoss struct {
	*bolt.DB
	lost atomic.Bool
}

func (u *unreachableAfterLoss) Heartbeat(context.Context, string, time.Time, time.Duration) error {
	u.lost.Store(true)
	return store.ErrLeaseLost
}

func (u *unreachableAfterLoss) FinishClaim(ctx context.Context, c store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if u.lost.Load() {
		return nil, nil, errors.New("store unreachable")
	}
	return u.DB.FinishClaim(ctx, c, fn, next)
}

// A runner that lost its lease does not retry an outcome write forever:
// Run returns, without its context ending, and the job is left for the
// rescue of whoever holds a lease.
func TestRunStopsRetryingWritesAfterItsLeaseIsLost(t *testing.T) {
	tg, release := heldTarget(t)
	db := openStore(t)
	enqueue(t, db, newJob(tg.URL()))
	u := &unreachableAfterLoss{DB: db}
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.LeaseTTL = 60 * time.Millisecond
	cfg.ShutdownGrace = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runner.New(u, cfg).Run(ctx) }()
	waitFor(t, "the attempt in flight and a refused heartbeat", func() bool { return tg.N() > 0 && u.lost.Load() })
	release()
	select {
	case err := <-errc:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Run = %v; want an error matching store.ErrLeaseLost", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run kept retrying an outcome write after its lease was lost")
	}
}

// heldTarget is a target that answers 201 to each request once release
// is called (or the test ends), so a test can act while an attempt is in
// flight.
func heldTarget(t *testing.T) (*target, func()) {
	t.Helper()
	held := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		<-held
		w.WriteHeader(http.StatusCreated)
	})
	t.Cleanup(release)
	return tg, release
}

// flakyBeats is a store whose heartbeats fail while down is set, as a
// database that cannot be reached for a while.
type flakyBeats struct {
	*bolt.DB
	down atomic.Bool
}

func (f *flakyBeats) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	if f.down.Load() {
		return store.ErrUnavailable
	}
	return f.DB.Heartbeat(ctx, id, now, ttl)
}

// A runner whose heartbeats fail claims nothing once its lease has gone a
// missed beat unrenewed, though its lease has not expired yet (another
// runner is about to rescue its jobs and query their status), and claims
// again once a heartbeat lands.
func TestRunPausesClaimsWhileItsLeaseGoesUnrenewed(t *testing.T) {
	db := openStore(t)
	tg := statusTarget(t, http.StatusCreated)
	fs := &flakyBeats{DB: db}
	fs.down.Store(true)
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.LeaseTTL = 3 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	started := time.Now()
	go func() { errc <- runner.New(fs, cfg).Run(ctx) }()

	first := newJob(tg.URL())
	enqueue(t, db, first)
	waitFor(t, "the first job to succeed", func() bool { return getJob(t, db, first.ID).State == store.StateSucceeded })
	// Past two thirds of the lease since it was registered, short of its
	// expiry: stale.
	time.Sleep(time.Until(started.Add(2200 * time.Millisecond)))
	second := newJob(tg.URL())
	enqueue(t, db, second)
	time.Sleep(300 * time.Millisecond)
	if got := getJob(t, db, second.ID); got.State != store.StatePending {
		t.Fatalf("with its lease unrenewed for 2.5 s of 3 s, the runner claimed a job (%s)", got.State)
	}
	healed := time.Now()
	fs.down.Store(false)
	waitFor(t, "the second job to succeed after a heartbeat landed", func() bool { return getJob(t, db, second.ID).State == store.StateSucceeded })
	if ev := getJob(t, db, second.ID).LastEvent(store.EventAttempt); ev == nil || ev.Start.Before(healed) {
		t.Errorf("the second job's attempt started at %v, before the heartbeat could land (%v)", ev, healed)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := tg.N(); n != 2 {
		t.Errorf("target got %d requests, want 2", n)
	}
}
