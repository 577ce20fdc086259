package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

func testClaimDueOrder(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	at := map[string]time.Time{
		"f2": now.Add(time.Hour),
		"p2": now.Add(-time.Second),
		"f1": now.Add(time.Nanosecond),
		"p3": now,
		"p1": now.Add(-3 * time.Second),
	}
	ids := map[string]string{}
	for _, k := range []string{"f2", "p2", "f1", "p3", "p1"} {
		j := NewJob(k, now.Add(-time.Hour))
		j.NextRunAt = at[k]
		ids[k] = enqueue(t, s, j).ID
	}

	for _, st := range []store.State{store.StateRunning, store.StateSucceeded, store.StateNeedsAttention} {
		if cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: st, Now: now, Limit: 10}); err == nil || len(cs) != 0 {
			t.Errorf("ClaimDue(%s) = %d claims, %v; want a refusal", st, len(cs), err)
		}
	}
	if cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 0}); err != nil || len(cs) != 0 {
		t.Errorf("ClaimDue(limit 0) = %d claims, %v; want none", len(cs), err)
	}

	var prepared []string
	prepare := func(j *store.Job) {
		if j.State != store.StateRunning || j.Attempts < 1 {
			t.Errorf("prepare sees job %s in %s with %d attempts; want running with the new attempt counted", j.Key, j.State, j.Attempts)
		}
		prepared = append(prepared, j.Key)
		j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: j.UpdatedAt})
	}
	claimKeys := func(now time.Time, limit int) []string {
		t.Helper()
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: limit, Prepare: prepare})
		if err != nil {
			t.Fatalf("ClaimDue(pending, %v, %d): %v", now, limit, err)
		}
		var keys []string
		for _, c := range cs {
			keys = append(keys, c.Job.Key)
			if c.Fence != c.Job.Fence || c.Fence == 0 {
				t.Errorf("claim of %s: Fence %d, Job.Fence %d; want equal and nonzero", c.Job.Key, c.Fence, c.Job.Fence)
			}
		}
		return keys
	}

	steps := []struct {
		now   time.Time
		limit int
		want  []string
	}{
		{now, 2, []string{"p1", "p2"}},
		{now, 10, []string{"p3"}},
		{now, 10, nil},
		{now.Add(time.Nanosecond), 10, []string{"f1"}},
		{now.Add(time.Minute), 10, nil},
	}
	for i, st := range steps {
		prepared = nil
		got := claimKeys(st.now, st.limit)
		if !slices.Equal(got, st.want) || !slices.Equal(prepared, st.want) {
			t.Errorf("step %d: ClaimDue(%v, limit %d) claimed %v, prepared %v; want %v", i, st.now.Sub(now), st.limit, got, prepared, st.want)
		}
	}

	for _, k := range []string{"p1", "p2", "p3"} {
		j := get(t, s, ids[k])
		ev := j.LastEvent(store.EventAttempt)
		switch {
		case j.State != store.StateRunning, j.Attempts != 1, j.AttemptsLeft() != j.MaxAttempts-1:
			t.Errorf("%s after claim: state %s, attempts %d, left %d; want running, 1, %d", k, j.State, j.Attempts, j.AttemptsLeft(), j.MaxAttempts-1)
		case !j.FirstSentAt.Equal(now), !j.UpdatedAt.Equal(now):
			t.Errorf("%s after claim: FirstSentAt %v, UpdatedAt %v; want both %v", k, j.FirstSentAt, j.UpdatedAt, now)
		case ev == nil || ev.N != 1:
			t.Errorf("%s after claim: attempt event %+v; want the one prepare added", k, ev)
		}
	}
	if f2 := get(t, s, ids["f2"]); f2.State != store.StatePending || f2.Attempts != 0 || f2.Fence != 0 {
		t.Errorf("f2 (not due) = %s, %d attempts, fence %d; want untouched", f2.State, f2.Attempts, f2.Fence)
	}
	if st := stats(t, s); st[store.StateRunning] != 4 || st[store.StatePending] != 1 {
		t.Errorf("Stats = %v; want 4 running, 1 pending", st)
	}

	// A no-effect failure sends p1 back to pending; its next claim is a
	// second attempt under a new fence, and the first send time stays.
	p1 := get(t, s, ids["p1"])
	later := now.Add(10 * time.Second)
	finish(t, s, p1.ID, p1.Fence, store.StatePending, later)
	if got := claimKeys(later.Add(-time.Nanosecond), 10); len(got) != 0 {
		t.Errorf("claimed %v before p1 was due again", got)
	}
	if got := claimKeys(later, 10); !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("claimed %v; want [p1]", got)
	}
	again := get(t, s, p1.ID)
	if again.Attempts != 2 || again.Fence <= p1.Fence || !again.FirstSentAt.Equal(now) {
		t.Errorf("p1 second claim: attempts %d, fence %d (was %d), FirstSentAt %v; want 2, higher, %v", again.Attempts, again.Fence, p1.Fence, again.FirstSentAt, now)
	}
}

func testClaimDueUnknown(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	u1 := driveTo(t, s, "u1", store.StateUnknown, now)
	u2 := driveTo(t, s, "u2", store.StateUnknown, now.Add(time.Second))
	lease := 30 * time.Second
	prepare := func(j *store.Job) { j.NextRunAt = j.UpdatedAt.Add(lease) }

	if cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Hour), Limit: 10}); err != nil || len(cs) != 0 {
		t.Errorf("ClaimDue(pending) = %v, %v; want no unknown job claimed as pending", claimIDs(cs), err)
	}
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now, Limit: 10, Prepare: prepare})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != u1.ID {
		t.Fatalf("ClaimDue(unknown, now) = %v, %v; want only u1", claimIDs(cs), err)
	}
	got := get(t, s, u1.ID)
	if got.State != store.StateUnknown || got.StatusQueries != u1.StatusQueries+1 || got.Attempts != u1.Attempts || got.Fence <= u1.Fence || cs[0].Fence != got.Fence {
		t.Errorf("u1 after status claim: %s, queries %d, attempts %d, fence %d (claim %d); want unknown, %d, %d, above %d",
			got.State, got.StatusQueries, got.Attempts, got.Fence, cs[0].Fence, u1.StatusQueries+1, u1.Attempts, u1.Fence)
	}
	if !got.NextRunAt.Equal(now.Add(lease)) {
		t.Errorf("u1 NextRunAt = %v; want the lease %v", got.NextRunAt, now.Add(lease))
	}
	// Under its lease u1 is not due; u2 is.
	cs, err = s.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now.Add(lease - time.Nanosecond), Limit: 10, Prepare: prepare})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != u2.ID {
		t.Errorf("ClaimDue(unknown, under lease) = %v, %v; want only u2", claimIDs(cs), err)
	}
	cs, err = s.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now.Add(lease), Limit: 10, Prepare: prepare})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != u1.ID {
		t.Errorf("ClaimDue(unknown, lease over) = %v, %v; want only u1", claimIDs(cs), err)
	}
	if st := stats(t, s); st[store.StateUnknown] != 2 || st[store.StateRunning] != 0 {
		t.Errorf("Stats = %v; want 2 unknown, 0 running", st)
	}
}

func testClaimDueConcurrent(t *testing.T, open func(t *testing.T) Store) {
	const (
		jobs    = 500
		workers = 10
		limit   = 7
	)
	s := open(t)
	now := T0()
	var batch []*store.Job
	for i := range jobs {
		j := NewJob(fmt.Sprintf("c-%03d", i), now)
		j.NextRunAt = now.Add(-time.Duration(jobs-i) * time.Millisecond)
		batch = append(batch, j)
	}
	rs, err := s.EnqueueMany(ctx, batch)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Existing {
			t.Fatalf("EnqueueMany result %d = %+v", i, r)
		}
	}

	claimed := make([][]store.Claim, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for range jobs { // bounded: each round claims at least one job or stops
				cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: limit})
				if err != nil {
					errs[w] = err
					return
				}
				if len(cs) == 0 {
					return
				}
				if len(cs) > limit {
					errs[w] = fmt.Errorf("ClaimDue returned %d claims over limit %d", len(cs), limit)
					return
				}
				for i := 1; i < len(cs); i++ {
					if cs[i].Job.NextRunAt.Before(cs[i-1].Job.NextRunAt) {
						errs[w] = fmt.Errorf("claims out of next_run_at order: %s before %s", cs[i-1].Job.Key, cs[i].Job.Key)
					}
				}
				claimed[w] = append(claimed[w], cs...)
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for w := range workers {
		if errs[w] != nil {
			t.Errorf("worker %d: %v", w, errs[w])
		}
		for _, c := range claimed[w] {
			seen[c.Job.ID]++
		}
	}
	for _, j := range batch {
		if seen[j.ID] != 1 {
			t.Errorf("job %s claimed %d times; want exactly once", j.Key, seen[j.ID])
		}
	}
	if len(seen) != jobs {
		t.Errorf("%d distinct jobs claimed; want %d", len(seen), jobs)
	}
	if st := stats(t, s); st[store.StateRunning] != jobs || st[store.StatePending] != 0 {
		t.Errorf("Stats = %v; want %d running", st, jobs)
	}
}

func testRecoverRunning(t *testing.T, open func(t *testing.T) Store) {
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
			t.Errorf("recovery fn sees %s, MayHaveEffect %v; want unknown, true", j.State, j.MayHaveEffect)
		}
		seen = append(seen, j.Key)
		j.NextRunAt = at.Add(5 * time.Second)
		j.AddEvent(store.Event{Kind: store.EventRecovery, Start: at, From: store.StateRunning, To: store.StateUnknown})
	})
	if err != nil || n != len(running) {
		t.Fatalf("RecoverRunning = %d, %v; want %d, nil", n, err, len(running))
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"run-0", "run-1", "run-2"}) {
		t.Errorf("recovery fn saw %v; want the three running jobs", seen)
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
		wantUnchanged(t, s, o, "RecoverRunning on a "+string(o.State)+" job")
	}
	if n, err := s.Rescue(ctx, at.Add(time.Second), nil); err != nil || n != 0 {
		t.Errorf("second RecoverRunning = %d, %v; want 0, nil", n, err)
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
