package bolt_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// Only a claim moves the fence: a TransitionFunc that rewinds it is
// refused, or a stale claim's write would pass its fence check again after
// the next claim.
func TestTransitionCannotRewindFence(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("f", now)
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	c1 := claimOne(t, db, store.StatePending, now)
	if _, err := db.Finish(ctx, j.ID, c1.Fence, func(j *store.Job) error {
		j.State, j.UpdatedAt, j.NextRunAt = store.StatePending, now, now
		j.Fence = 0
		return nil
	}); err == nil || !strings.Contains(err.Error(), "fence and owner never change") {
		t.Fatalf("Finish with a TransitionFunc that rewound the fence from %d to 0: %v; want a refusal", c1.Fence, err)
	}
	if got, _ := db.Get(j.ID); got.Fence != c1.Fence || got.State != store.StateRunning {
		t.Errorf("after the refusal the job is %s with fence %d; want running with fence %d", got.State, got.Fence, c1.Fence)
	}
}

// A panic in the caller's function run inside a write is reported as the
// caller's bug, not as a damaged file; the operations batched with it
// still commit.
func TestCallerPanicInWriteIsNotCorruption(t *testing.T) {
	db, _ := newDB(t, &bolt.Options{CommitLinger: 20 * time.Millisecond})
	now := storetest.T0()
	cw := workerClaim(t, db, now)
	p := storetest.NewJob("p", now.Add(-time.Second))
	if _, err := db.Enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	plan := chainPlan(now, time.Second)
	plan.Pending = func(j *store.Job) { panic("app bug") }
	var wg sync.WaitGroup
	var ferr error
	errs := make([]error, 8)
	wg.Go(func() { _, _, ferr = db.FinishClaim(ctx, cw, succeed(now), plan) })
	for i := range errs {
		wg.Go(func() { _, errs[i] = db.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("n%d", i), now)) })
	}
	wg.Wait()
	if ferr == nil || errors.Is(ferr, store.ErrCorrupt) || !strings.Contains(ferr.Error(), "app bug") || !strings.Contains(ferr.Error(), "not damaged") {
		t.Errorf("FinishClaim with a panicking ClaimFunc: %v; want an error naming the panic, not ErrCorrupt", ferr)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("neighbour %d: %v", i, err)
		}
	}
	// The same for a TransitionFunc, and for a claim round's prepare.
	c := claimOne(t, db, store.StatePending, now)
	if _, err := db.Finish(ctx, c.Job.ID, c.Fence, func(*store.Job) error { panic("transition bug") }); err == nil || errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "transition bug") {
		t.Errorf("Finish with a panicking TransitionFunc: %v; want the caller's panic, not ErrCorrupt", err)
	}
	if _, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Hour), Limit: 5, Prepare: func(*store.Job) { panic("prepare bug") }}); err == nil || errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "prepare bug") {
		t.Errorf("ClaimDue with a panicking prepare: %v; want the caller's panic, not ErrCorrupt", err)
	}
}

// The commit observer (the commit metrics) is told of committed
// transactions only.
func TestCommitObserverSeesOnlyCommits(t *testing.T) {
	var fail atomic.Bool
	db, _ := newDB(t, &bolt.Options{CommitHook: func(int) error {
		if fail.Load() {
			return errInjected
		}
		return nil
	}})
	var observed atomic.Int64
	db.SetCommitObserver(func(time.Duration, int) { observed.Add(1) })
	now := storetest.T0()
	if _, err := db.Enqueue(ctx, storetest.NewJob("a", now)); err != nil {
		t.Fatal(err)
	}
	c0, _ := db.Counters()
	o0 := observed.Load()
	if c0 != 1 || o0 != 1 {
		t.Fatalf("after one enqueue: %d commits, %d observed", c0, o0)
	}
	if res, err := db.Enqueue(ctx, storetest.NewJob("a", now)); err != nil || !res.Existing {
		t.Fatal(res, err)
	}
	fail.Store(true)
	if _, err := db.Enqueue(ctx, storetest.NewJob("b", now)); !errors.Is(err, errInjected) {
		t.Fatal(err)
	}
	fail.Store(false)
	c1, _ := db.Counters()
	if o := observed.Load() - o0; o != int64(c1-c0) {
		t.Errorf("observer told of %d transactions; %d were committed", o, c1-c0)
	}
}
