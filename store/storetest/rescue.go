package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// testRescueNoLeases: with no runner registered, every running job is
// rescued, whatever its state's neighbours; nothing else is touched.
func testRescueNoLeases(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	var others []*store.Job
	step := 0
	next := func() time.Time { step++; return now.Add(time.Duration(step) * time.Second) }
	// needs_attention before unknown: driving a job through unknown claims
	// the earliest due unknown job.
	for _, st := range []store.State{store.StateSucceeded, store.StateFailed, store.StateNeedsAttention, store.StateUnknown, store.StateCanceled} {
		others = append(others, driveTo(t, s, "other-"+string(st), st, next()))
	}
	var running []*store.Job
	for i := range 3 {
		running = append(running, driveTo(t, s, fmt.Sprintf("run-%d", i), store.StateRunning, next()))
	}
	p := NewJob("pending", now)
	p.NextRunAt = now.Add(time.Hour)
	others = append(others, enqueue(t, s, p))
	for i := range others {
		others[i] = get(t, s, others[i].ID)
	}

	at := now.Add(time.Minute)
	var seen []string
	n, err := s.Rescue(ctx, at, func(j *store.Job) {
		if j.State != store.StateUnknown || !j.MayHaveEffect {
			t.Errorf("Rescue's fn sees %s, MayHaveEffect %v; want unknown, true", j.State, j.MayHaveEffect)
		}
		seen = append(seen, j.Key)
		j.NextRunAt = at.Add(5 * time.Second)
		j.AddEvent(store.Event{Kind: store.EventRecovery, Start: at, From: store.StateRunning, To: store.StateUnknown})
	})
	if err != nil || n != len(running) {
		t.Fatalf("Rescue = %d, %v; want %d, nil", n, err, len(running))
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"run-0", "run-1", "run-2"}) {
		t.Errorf("Rescue's fn saw %v; want the three running jobs", seen)
	}
	for _, r := range running {
		j := get(t, s, r.ID)
		switch {
		case j.State != store.StateUnknown || !j.MayHaveEffect:
			t.Errorf("%s after recovery: %s, MayHaveEffect %v; want unknown, true", j.Key, j.State, j.MayHaveEffect)
		case !j.UnknownSince.Equal(at) || !j.NextRunAt.Equal(at.Add(5*time.Second)) || !j.UpdatedAt.Equal(at):
			t.Errorf("%s after recovery: UnknownSince %v, NextRunAt %v, UpdatedAt %v; want %v, %v, %v", j.Key, j.UnknownSince, j.NextRunAt, j.UpdatedAt, at, at.Add(5*time.Second), at)
		case j.Attempts != r.Attempts || j.LastEvent(store.EventRecovery) == nil:
			t.Errorf("%s after recovery: attempts %d (was %d), recovery event %v", j.Key, j.Attempts, r.Attempts, j.LastEvent(store.EventRecovery))
		}
	}
	for _, o := range others {
		wantUnchanged(t, s, o, "Rescue of a "+string(o.State)+" job")
	}
	if n, err := s.Rescue(ctx, at.Add(time.Second), nil); err != nil || n != 0 {
		t.Errorf("second Rescue = %d, %v; want 0, nil", n, err)
	}
	if st := stats(t, s); st[store.StateRunning] != 0 || st[store.StateUnknown] != 4 {
		t.Errorf("Stats = %v; want 0 running, 4 unknown", st)
	}
	// The recovered jobs are due for a status query when fn said, not before.
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: at.Add(5 * time.Second), Limit: 10})
	if err != nil {
		t.Fatalf("ClaimDue(unknown): %v", err)
	}
	if len(cs) != 4 {
		t.Errorf("ClaimDue(unknown) after recovery claimed %d; want 4 (3 recovered + 1 older)", len(cs))
	}
}

// testRescueLeases: Rescue moves exactly the running jobs whose owner
// holds no live lease (it expired, was deregistered, was never
// registered, or the job has no owner) to unknown, with MayHaveEffect, a
// raised fence, NextRunAt at the rescue and fn applied; the running jobs
// of a live runner and the unknown jobs of a dead one (a status query in
// flight) are not touched. The old claims' finishes are then refused.
func testRescueLeases(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	live := register(t, s, now, time.Hour)
	expired := register(t, s, now, 10*time.Second)
	gone := register(t, s, now, time.Hour)
	never := store.NewID()
	// A backend may refuse an empty runner id; if it takes one, jobs
	// without an owner are still everyone's to rescue.
	_ = s.Register(ctx, store.RunnerInfo{ID: ""}, now, time.Hour)

	sec := func(n int) time.Time { return now.Add(time.Duration(n) * time.Second) }
	claims := map[string]store.Claim{} // key → the claim that made the job running
	runFor := func(key, owner string, at time.Time) {
		j := enqueue(t, s, NewJob(key, at))
		claims[key] = claimFor(t, s, store.StatePending, j.ID, owner, at)
	}
	// The unknown job first: driving it claims the earliest due unknown.
	deadQuery := driveFor(t, s, "expired-unknown", store.StateUnknown, expired.ID, sec(1))
	claimFor(t, s, store.StateUnknown, deadQuery.ID, expired.ID, sec(1))
	runFor("live-1", live.ID, sec(2))
	runFor("live-2", live.ID, sec(3))
	runFor("expired", expired.ID, sec(4))
	runFor("gone", gone.ID, sec(5))
	runFor("unowned", "", sec(6))
	rescuable := []string{"expired", "gone", "unowned"}
	nj := enqueue(t, s, NewJob("never", sec(7)))
	njBefore := get(t, s, nj.ID)
	if cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: sec(7), Limit: 1, Owner: never}); !errors.Is(err, store.ErrLeaseLost) || len(cs) != 0 {
		t.Errorf("ClaimDue for a runner never registered = %v, %v; want no claim and ErrLeaseLost", claimIDs(cs), err)
	}
	wantUnchanged(t, s, njBefore, "a refused claim for a runner never registered")
	if err := s.Deregister(ctx, gone.ID); err != nil {
		t.Fatalf("Deregister(gone): %v", err)
	}
	untouched := []*store.Job{get(t, s, claims["live-1"].Job.ID), get(t, s, claims["live-2"].Job.ID), get(t, s, deadQuery.ID)}

	at := sec(30) // expired's lease ended at 10s; live's lasts an hour
	var seen []string
	n, err := s.Rescue(ctx, at, func(j *store.Job) {
		seen = append(seen, j.Key)
		if j.State != store.StateUnknown || !j.MayHaveEffect || !j.NextRunAt.Equal(at) {
			t.Errorf("Rescue's fn sees %s: %s, MayHaveEffect %v, NextRunAt %v; want unknown, true, %v", j.Key, j.State, j.MayHaveEffect, j.NextRunAt, at)
		}
		j.LastError = "rescued by storetest"
		j.AddEvent(store.Event{Kind: store.EventRecovery, N: j.Attempts, Start: at, From: store.StateRunning, To: store.StateUnknown})
	})
	slices.Sort(seen)
	slices.Sort(rescuable)
	if err != nil || n != len(rescuable) || !slices.Equal(seen, rescuable) {
		t.Fatalf("Rescue = %d, %v, fn saw %v; want %d (%v)", n, err, seen, len(rescuable), rescuable)
	}
	rescued := map[string]*store.Job{}
	for _, k := range rescuable {
		c := claims[k]
		j := get(t, s, c.Job.ID)
		rescued[k] = j
		switch {
		case j.State != store.StateUnknown || !j.MayHaveEffect || j.Fence <= c.Fence:
			t.Errorf("%s after Rescue: %s, MayHaveEffect %v, fence %d (claim %d); want unknown, true, a raised fence", k, j.State, j.MayHaveEffect, j.Fence, c.Fence)
		case !j.NextRunAt.Equal(at) || j.Attempts != c.Attempt:
			t.Errorf("%s after Rescue: NextRunAt %v, attempts %d; want %v, %d", k, j.NextRunAt, j.Attempts, at, c.Attempt)
		case j.LastError != "rescued by storetest" || j.LastEvent(store.EventRecovery) == nil:
			t.Errorf("%s after Rescue: last error %q, recovery event %v; want fn's changes stored", k, j.LastError, j.LastEvent(store.EventRecovery))
		}
	}
	for _, j := range untouched {
		wantUnchanged(t, s, j, "Rescue of "+j.Key)
	}

	// The old claims are fenced: their outcomes and chained claims are
	// refused and change nothing (every rescued job is due meanwhile).
	before := stats(t, s)
	for _, k := range rescuable {
		got, next, err := s.FinishClaim(ctx, claims[k], moveTo(store.StateSucceeded, at), &store.NextClaim{Now: at, Owner: live.ID})
		if !errors.Is(err, store.ErrFenced) || got != nil || next != nil {
			t.Errorf("FinishClaim of %s's claim from before the rescue = %v, next %v, %v; want ErrFenced, no job, no claim", k, got, next, err)
		}
	}
	for _, j := range rescued {
		wantUnchanged(t, s, j, "a fenced finish after the rescue")
	}
	for _, j := range untouched {
		wantUnchanged(t, s, j, "a fenced finish after the rescue")
	}
	if after := stats(t, s); !statsEqual(after, before) {
		t.Errorf("Stats after fenced finishes = %v; want %v", after, before)
	}

	if n, err := s.Rescue(ctx, at, nil); err != nil || n != 0 {
		t.Errorf("second Rescue = %d, %v; want 0, nil", n, err)
	}
	// Once live's lease ends too, its jobs go the same way (fn may be nil).
	late := now.Add(2 * time.Hour)
	if n, err := s.Rescue(ctx, late, nil); err != nil || n != 2 {
		t.Fatalf("Rescue after the live lease ended = %d, %v; want 2", n, err)
	}
	for _, k := range []string{"live-1", "live-2"} {
		c := claims[k]
		if j := get(t, s, c.Job.ID); j.State != store.StateUnknown || !j.MayHaveEffect || j.Fence <= c.Fence || !j.NextRunAt.Equal(late) {
			t.Errorf("%s after its runner's lease ended: %s, MayHaveEffect %v, fence %d (claim %d), NextRunAt %v; want unknown, true, raised, %v",
				k, j.State, j.MayHaveEffect, j.Fence, c.Fence, j.NextRunAt, late)
		}
	}
	if st := stats(t, s); st[store.StateRunning] != 0 || st[store.StateUnknown] != int64(len(rescuable)+3) {
		t.Errorf("Stats = %v; want no running job, %d unknown", st, len(rescuable)+3)
	}
}
