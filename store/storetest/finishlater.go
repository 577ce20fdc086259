package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// finishLater is s's FinishLater; a backend that commits each outcome in
// its call has none, and the test is skipped for it.
func finishLater(t *testing.T, s Store) store.FinishLater {
	t.Helper()
	fl, ok := s.(store.FinishLater)
	if !ok {
		t.Skipf("%T commits every outcome in its call (no store.FinishLater)", s)
	}
	return fl
}

// laterResult is one done call of FinishClaimLater.
type laterResult struct {
	id  string
	j   *store.Job
	err error
}

// testFinishLater: queued finishes are acknowledged once each, after
// their commit, as FinishClaim would answer them: the written job, or
// ErrFenced for a claim that no longer holds its job; a refused change
// is an error of the call, with no done.
func testFinishLater(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	fl := finishLater(t, s)
	now := T0()
	r := register(t, s, now, time.Hour)
	jobs := enqueueDue(t, s, "later", 20, now)
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: len(jobs), Owner: r.ID})
	if err != nil || len(cs) != len(jobs) {
		t.Fatalf("ClaimDue = %d claims, %v; want %d", len(cs), err, len(jobs))
	}
	done := make(chan laterResult, len(cs)+1)
	end := now.Add(time.Second)
	stale := cs[0]
	stale.Fence-- // a claim its job no longer holds
	queue := func(name string, c store.Claim, fn store.TransitionFunc) error {
		return fl.FinishClaimLater(c, fn, func(j *store.Job, err error) { done <- laterResult{name, j, err} })
	}
	if err := queue("stale", stale, moveTo(store.StateSucceeded, end)); err != nil && !errors.Is(err, store.ErrFenced) {
		t.Fatalf("FinishClaimLater of a stale claim: %v; want nil (ErrFenced in done) or ErrFenced", err)
	} else if err != nil {
		done <- laterResult{"stale", nil, err}
	}
	errMine := errors.New("storetest: refused by fn")
	if err := queue(cs[1].Job.ID, cs[1], func(j *store.Job) error { j.State = store.StateSucceeded; return errMine }); !errors.Is(err, errMine) {
		t.Fatalf("FinishClaimLater with fn refusing: %v; want fn's error", err)
	}
	for _, c := range cs {
		if err := queue(c.Job.ID, c, moveTo(store.StateSucceeded, end)); err != nil {
			t.Fatalf("FinishClaimLater(%s): %v", c.Job.Key, err)
		}
	}
	got := map[string]laterResult{}
	timeout := time.After(30 * time.Second)
	for len(got) < len(cs)+1 {
		select {
		case res := <-done:
			if _, twice := got[res.id]; twice {
				t.Fatalf("done called twice for %s", res.id)
			}
			got[res.id] = res
		case <-timeout:
			t.Fatalf("%d of %d finishes acknowledged after 30 s", len(got), len(cs)+1)
		}
	}
	if res := got["stale"]; res.j != nil || !errors.Is(res.err, store.ErrFenced) {
		t.Errorf("finish of a stale claim of %s acknowledged with %v, %v; want ErrFenced", stale.Job.Key, res.j, res.err)
	}
	for _, c := range cs {
		res := got[c.Job.ID]
		stored := get(t, s, c.Job.ID)
		if res.err != nil || res.j == nil || res.j.State != store.StateSucceeded {
			t.Errorf("finish of %s acknowledged with %v, %v; want the succeeded job", c.Job.Key, res.j, res.err)
			continue
		}
		if !JobsEqual(stored, res.j) {
			t.Errorf("%s: stored job differs from the acknowledged one:\n ack    %+v\n stored %+v", c.Job.Key, normalize(res.j), normalize(stored))
		}
	}
}

// testFinishLaterClose: Close returns after every queued finish is
// committed and acknowledged (testClose checks the calls after it).
func testFinishLaterClose(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	fl := finishLater(t, s)
	now := T0()
	jobs := enqueueDue(t, s, "close", 50, now)
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: len(jobs)})
	if err != nil || len(cs) != len(jobs) {
		t.Fatalf("ClaimDue = %d claims, %v; want %d", len(cs), err, len(jobs))
	}
	done := make(chan error, len(cs))
	for _, c := range cs {
		if err := fl.FinishClaimLater(c, moveTo(store.StateSucceeded, now.Add(time.Second)), func(_ *store.Job, err error) { done <- err }); err != nil {
			t.Fatalf("FinishClaimLater(%s): %v", c.Job.Key, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := len(done); n != len(cs) {
		t.Fatalf("Close returned with %d of %d queued finishes acknowledged", n, len(cs))
	}
	for range cs {
		if err := <-done; err != nil {
			t.Errorf("a finish queued before Close: %v; want it committed", err)
		}
	}
}
