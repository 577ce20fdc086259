package bolt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// chainPlan is a NextClaim like the runner's: an attempt event for a
// pending job, a lease for an unknown one.
func chainPlan(now time.Time, lease time.Duration) *store.NextClaim {
	return &store.NextClaim{
		Now: now,
		Pending: func(j *store.Job) {
			j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
		},
		Unknown: func(j *store.Job) { j.NextRunAt = now.Add(lease) },
	}
}

func succeed(now time.Time) store.TransitionFunc {
	return func(j *store.Job) error {
		j.State, j.UpdatedAt = store.StateSucceeded, now
		return nil
	}
}

// claimID names a claim in failure messages.
func claimID(c *store.Claim) string {
	if c == nil {
		return "none"
	}
	return c.Job.Key
}

// claimOne claims the one job of state s due at now.
func claimOne(t *testing.T, db *bolt.DB, s store.State, now time.Time) store.Claim {
	t.Helper()
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: s, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue(%s) = %d claims, %v; want 1", s, len(cs), err)
	}
	return cs[0]
}

// workerClaim enqueues a job due a minute before now and claims it: the
// job a worker has just worked.
func workerClaim(t *testing.T, db *bolt.DB, now time.Time) store.Claim {
	t.Helper()
	w := storetest.NewJob("w", now.Add(-time.Minute))
	if _, err := db.Enqueue(ctx, w); err != nil {
		t.Fatal(err)
	}
	return claimOne(t, db, store.StatePending, now.Add(-time.Minute))
}

// A chained claim takes the due job with the earliest next_run_at, pending
// or unknown, writes it in the finish's commit exactly as ClaimDue would,
// and takes nothing that is not due.
func TestFinishClaimChainedTakesEarliestDue(t *testing.T) {
	db, path := newDB(t, nil)
	now := storetest.T0()
	const lease = 30 * time.Second

	// u: an unknown job due 2s ago; p: pending, due 1s ago; later: not due.
	u := storetest.NewJob("u", now.Add(-time.Hour))
	if _, err := db.Enqueue(ctx, u); err != nil {
		t.Fatal(err)
	}
	cu := claimOne(t, db, store.StatePending, now.Add(-time.Hour))
	if _, _, err := db.FinishClaim(ctx, cu, func(j *store.Job) error {
		j.State, j.MayHaveEffect, j.NextRunAt = store.StateUnknown, true, now.Add(-2*time.Second)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	w := storetest.NewJob("w", now.Add(-time.Hour))
	w.NextRunAt = now.Add(-time.Hour)
	if _, err := db.Enqueue(ctx, w); err != nil {
		t.Fatal(err)
	}
	cw := claimOne(t, db, store.StatePending, now.Add(-time.Hour))
	p := storetest.NewJob("p", now.Add(-time.Second))
	later := storetest.NewJob("later", now.Add(time.Hour))
	if _, err := db.EnqueueMany(ctx, []*store.Job{p, later}); err != nil {
		t.Fatal(err)
	}

	// w's outcome claims u (due 2s ago) before p (due 1s ago).
	got, next, err := db.FinishClaim(ctx, cw, succeed(now), chainPlan(now, lease))
	if err != nil || got.State != store.StateSucceeded {
		t.Fatalf("FinishClaim(w) = %+v, %v; want w succeeded", got, err)
	}
	if next == nil || next.Job.ID != u.ID {
		t.Fatalf("chained claim after w = %s; want u (the earliest due)", claimID(next))
	}
	stored, _ := db.Get(u.ID)
	if stored.State != store.StateUnknown || stored.StatusQueries != 1 || stored.Fence != next.Fence ||
		!stored.NextRunAt.Equal(now.Add(lease)) || !stored.UpdatedAt.Equal(now) {
		t.Errorf("u after its chained claim: %s, queries %d, fence %d (claim %d), next_run_at %v, updated %v; want unknown, 1, equal, the lease, now",
			stored.State, stored.StatusQueries, stored.Fence, next.Fence, stored.NextRunAt, stored.UpdatedAt)
	}
	if !storetest.JobsEqual(stored, next.Job) {
		t.Errorf("the claim's job differs from the stored one:\n claim  %+v\n stored %+v", next.Job, stored)
	}

	// u's outcome claims p, as a new attempt.
	_, next, err = db.FinishClaim(ctx, *next, succeed(now), chainPlan(now, lease))
	if err != nil || next == nil || next.Job.ID != p.ID {
		t.Fatalf("chained claim after u = %s, %v; want p", claimID(next), err)
	}
	pc := *next

	// The process dies here: the chained claim is durable.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, nil)
	stored, _ = db.Get(p.ID)
	if stored.State != store.StateRunning || stored.Attempts != 1 || stored.Fence != pc.Fence || stored.LastEvent(store.EventAttempt) == nil {
		t.Fatalf("p after reopen: %s, attempts %d, fence %d (claim %d), attempt event %v; want running, 1, equal, present",
			stored.State, stored.Attempts, stored.Fence, pc.Fence, stored.LastEvent(store.EventAttempt))
	}

	// p's outcome finds nothing due: later is not.
	_, next, err = db.FinishClaim(ctx, pc, succeed(now), chainPlan(now, lease))
	if err != nil || next != nil {
		t.Fatalf("FinishClaim(p) = claim %s, %v; want no claim (nothing due)", claimID(next), err)
	}
	st, _ := db.Stats()
	if st[store.StateSucceeded] != 3 || st[store.StatePending] != 1 || st[store.StateRunning] != 0 || st[store.StateUnknown] != 0 {
		t.Errorf("Stats = %v; want 3 succeeded, 1 pending", st)
	}
}

// A job a claim round of the same handle is claiming is passed over; the
// next due one is claimed instead.
func TestFinishClaimChainedPassesOverClaiming(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	cw := workerClaim(t, db, now)
	a := storetest.NewJob("a", now.Add(-2*time.Second))
	b := storetest.NewJob("b", now.Add(-time.Second))
	if _, err := db.EnqueueMany(ctx, []*store.Job{a, b}); err != nil {
		t.Fatal(err)
	}
	unmark := bolt.MarkClaiming(db, a.ID)
	_, next, err := db.FinishClaim(ctx, cw, succeed(now), chainPlan(now, time.Second))
	unmark()
	if err != nil || next == nil || next.Job.ID != b.ID {
		t.Fatalf("FinishClaim with a being claimed = %s, %v; want b", claimID(next), err)
	}
	if got, _ := db.Get(a.ID); got.State != store.StatePending || got.Fence != 0 {
		t.Errorf("job a, being claimed: %s, fence %d; want untouched pending", got.State, got.Fence)
	}
}

// A refused finish claims nothing: the stale worker's outcome and its
// chained claim are one write.
func TestFinishClaimChainedRefusedClaimsNothing(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	cw := workerClaim(t, db, now)
	// Someone else wrote w since the claim (recovery after a restart).
	if _, err := db.Finish(ctx, cw.Job.ID, cw.Fence, func(j *store.Job) error {
		j.State, j.MayHaveEffect = store.StateUnknown, true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := storetest.NewJob("p", now.Add(-time.Second))
	if _, err := db.Enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	before, _ := db.Get(p.ID)
	_, next, err := db.FinishClaim(ctx, cw, succeed(now), chainPlan(now, time.Second))
	if !errors.Is(err, store.ErrFenced) || next != nil {
		t.Fatalf("FinishClaim on a stale claim = %s, %v; want ErrFenced and no claim", claimID(next), err)
	}
	if after, _ := db.Get(p.ID); !storetest.JobsEqual(after, before) {
		t.Errorf("p changed although the finish was refused: %+v", after)
	}

	// A transition the table refuses is checked before the writer: nothing
	// written, nothing claimed either.
	cp := claimOne(t, db, store.StatePending, now)
	q := storetest.NewJob("q", now.Add(-time.Second))
	if _, err := db.Enqueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	illegal := store.State("")
	for _, s := range store.States() {
		if s != store.StateRunning && !store.Legal(store.StateRunning, s) {
			illegal = s
			break
		}
	}
	if illegal == "" {
		t.Fatal("every state is reachable from running; the test needs an illegal one")
	}
	_, next, err = db.FinishClaim(ctx, cp, func(j *store.Job) error {
		j.State = illegal
		return nil
	}, chainPlan(now, time.Second))
	var te *store.TransitionError
	if !errors.As(err, &te) || next != nil {
		t.Fatalf("FinishClaim running → %s = %s, %v; want a TransitionError, no claim", illegal, claimID(next), err)
	}
	if got, _ := db.Get(q.ID); got.State != store.StatePending || got.Fence != 0 {
		t.Errorf("q is %s (fence %d) after a refused finish; want untouched pending", got.State, got.Fence)
	}
}

// When the commit fails, neither the finish nor the chained claim is
// written; the same call afterwards does both.
func TestFinishClaimChainedCommitFailure(t *testing.T) {
	var fail bool // read by the writer after each op is queued: ordered by the queue
	db, _ := newDB(t, &bolt.Options{CommitHook: func(int) error {
		if fail {
			return errors.New("disk on fire")
		}
		return nil
	}})
	now := storetest.T0()
	cw := workerClaim(t, db, now)
	p := storetest.NewJob("p", now.Add(-time.Second))
	if _, err := db.Enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	fail = true
	_, next, err := db.FinishClaim(ctx, cw, succeed(now), chainPlan(now, time.Second))
	fail = false
	if err == nil || next != nil {
		t.Fatalf("FinishClaim with a failing commit = %s, %v; want an error, no claim", claimID(next), err)
	}
	st, _ := db.Stats()
	if st[store.StateRunning] != 1 || st[store.StatePending] != 1 || st[store.StateSucceeded] != 0 {
		t.Fatalf("after the failed commit: Stats = %v; want w running, p pending", st)
	}
	_, next, err = db.FinishClaim(ctx, cw, succeed(now), chainPlan(now, time.Second))
	if err != nil || next == nil || next.Job.ID != p.ID {
		t.Fatalf("FinishClaim after the failure = %s, %v; want p claimed", claimID(next), err)
	}
}
