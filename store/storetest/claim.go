package storetest

import (
	"errors"
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
	batch := enqueueDue(t, s, "c", jobs, now)
	claimConcurrently(t, batch, workers, func(int) (ids []string, err error) {
		for range jobs { // bounded: each round claims at least one job or stops
			cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: limit})
			if err != nil || len(cs) == 0 {
				return ids, err
			}
			if len(cs) > limit {
				return ids, fmt.Errorf("ClaimDue returned %d claims over limit %d", len(cs), limit)
			}
			for i := 1; i < len(cs); i++ {
				if cs[i].Job.NextRunAt.Before(cs[i-1].Job.NextRunAt) {
					err = fmt.Errorf("claims out of next_run_at order: %s before %s", cs[i-1].Job.Key, cs[i].Job.Key)
				}
			}
			ids = append(ids, claimIDs(cs)...)
			if err != nil {
				return ids, err
			}
		}
		return ids, nil
	})
	if st := stats(t, s); st[store.StateRunning] != jobs || st[store.StatePending] != 0 {
		t.Errorf("Stats = %v; want %d running", st, jobs)
	}
}

// enqueueDue enqueues n new jobs (keys prefix-000 on) due a millisecond
// apart before now, the first the oldest.
func enqueueDue(t *testing.T, s Store, prefix string, n int, now time.Time) []*store.Job {
	t.Helper()
	var batch []*store.Job
	for i := range n {
		j := NewJob(fmt.Sprintf("%s-%03d", prefix, i), now)
		j.NextRunAt = now.Add(-time.Duration(n-i) * time.Millisecond)
		batch = append(batch, j)
	}
	rs, err := s.EnqueueMany(ctx, batch)
	if err != nil || len(rs) != n {
		t.Fatalf("EnqueueMany = %d results, %v; want %d", len(rs), err, n)
	}
	for i, r := range rs {
		if r.Err != nil || r.Existing {
			t.Fatalf("EnqueueMany result %d = %+v", i, r)
		}
	}
	return batch
}

// claimConcurrently runs claimer on workers goroutines started together;
// each returns the ids of the jobs it claimed. It fails unless every job
// of batch was claimed exactly once, and nothing else was.
func claimConcurrently(t *testing.T, batch []*store.Job, workers int, claimer func(w int) ([]string, error)) {
	t.Helper()
	claimed := make([][]string, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			claimed[w], errs[w] = claimer(w)
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for w := range workers {
		if errs[w] != nil {
			t.Errorf("worker %d: %v", w, errs[w])
		}
		for _, id := range claimed[w] {
			seen[id]++
		}
	}
	for _, j := range batch {
		if seen[j.ID] != 1 {
			t.Errorf("job %s claimed %d times; want exactly once", j.Key, seen[j.ID])
		}
	}
	if len(seen) != len(batch) {
		t.Errorf("%d distinct jobs claimed; want %d", len(seen), len(batch))
	}
}

// testClaimDueOwner: a claim records its owner on the job, and the Claim
// carries the job's fence, attempt and owner; a later claim by another
// runner takes the job over under a higher fence.
func testClaimDueOwner(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	a := register(t, s, now, time.Hour)
	b := register(t, s, now, time.Hour)
	var ids []string
	for i := range 3 {
		j := NewJob(fmt.Sprintf("o-%d", i), now)
		j.NextRunAt = now.Add(time.Duration(i-3) * time.Second)
		ids = append(ids, enqueue(t, s, j).ID)
	}
	notDue := NewJob("not-due", now)
	notDue.NextRunAt = now.Add(time.Hour)
	enqueue(t, s, notDue)
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 2, Owner: a.ID})
	if err != nil || !slices.Equal(claimIDs(cs), ids[:2]) {
		t.Fatalf("ClaimDue(pending, limit 2, owner a) = %v, %v; want the two oldest %v", claimIDs(cs), err, ids[:2])
	}
	for _, c := range cs {
		wantClaim(t, s, c, a.ID)
		if c.Attempt != 1 {
			t.Errorf("claim of %s: attempt %d; want 1", c.Job.Key, c.Attempt)
		}
	}

	// o-0 goes back to pending (no effect), due after o-2: b claims both,
	// o-2's first attempt and o-0's second.
	first := cs[0]
	later := now.Add(time.Second)
	finish(t, s, first.Job.ID, first.Fence, store.StatePending, later)
	bs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: later, Limit: 10, Owner: b.ID})
	if err != nil || !slices.Equal(claimIDs(bs), []string{ids[2], ids[0]}) {
		t.Fatalf("ClaimDue(pending, owner b) = %v, %v; want o-2 then o-0 %v", claimIDs(bs), err, []string{ids[2], ids[0]})
	}
	for _, c := range bs {
		wantClaim(t, s, c, b.ID)
	}
	if again := bs[1]; again.Attempt != 2 || again.Fence <= first.Fence || !again.Job.FirstSentAt.Equal(now) {
		t.Errorf("b's claim of o-0: attempt %d, fence %d (a's %d), FirstSentAt %v; want 2, higher, %v", again.Attempt, again.Fence, first.Fence, again.Job.FirstSentAt, now)
	}

	// o-1 may have taken effect: b's status query claim keeps the attempt.
	second := cs[1]
	finish(t, s, second.Job.ID, second.Fence, store.StateUnknown, later)
	q := claimFor(t, s, store.StateUnknown, second.Job.ID, b.ID, later)
	if q.Attempt != 1 || q.Job.StatusQueries != 1 || q.Fence <= second.Fence {
		t.Errorf("b's status claim of o-1: attempt %d, status queries %d, fence %d (a's %d); want 1, 1, higher", q.Attempt, q.Job.StatusQueries, q.Fence, second.Fence)
	}
}

// testClaimExpiredOwner: the contract does not say whether a runner
// whose lease has expired may still claim. Whatever the backend answers,
// such a claim protects nothing: it is either refused (nothing changes)
// or rescued by the next Rescue, as any job of an owner without a live
// lease. The finish a chained claim rides on stands either way.
func testClaimExpiredOwner(t *testing.T, open func(t *testing.T) Store) {
	const ttl = 10 * time.Second
	now := T0()
	at := now.Add(20 * time.Second)
	expire := func(t *testing.T, s Store) store.RunnerInfo {
		t.Helper()
		r := register(t, s, now, ttl)
		wantLeaseLost(t, s.Heartbeat(ctx, r.ID, at, ttl), "Heartbeat after the lease's expiry")
		return r
	}
	t.Run("ClaimDue", func(t *testing.T) {
		s := open(t)
		r := expire(t, s)
		j := enqueue(t, s, NewJob("k", now))
		before := get(t, s, j.ID)
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: at, Limit: 1, Owner: r.ID})
		if !errors.Is(err, store.ErrLeaseLost) || len(cs) != 0 {
			t.Fatalf("ClaimDue for an expired owner = %v, %v; want no claim and ErrLeaseLost", claimIDs(cs), err)
		}
		wantUnchanged(t, s, before, "a refused claim for an expired owner")
	})
	t.Run("FinishClaim next", func(t *testing.T) {
		s := open(t)
		w := enqueue(t, s, NewJob("w", now))
		cw := claim(t, s, store.StatePending, w.ID, now)
		r := expire(t, s)
		p := enqueue(t, s, NewJob("p", now))
		before := get(t, s, p.ID)
		got, next, err := s.FinishClaim(ctx, cw, moveTo(store.StateSucceeded, at), &store.NextClaim{Now: at, Owner: r.ID})
		if err != nil || got == nil || got.State != store.StateSucceeded {
			t.Fatalf("FinishClaim(w) with a chained claim for an expired owner = %+v, %v; want w succeeded", got, err)
		}
		if stored := get(t, s, w.ID); stored.State != store.StateSucceeded {
			t.Errorf("w after its finish: %s; want succeeded", stored.State)
		}
		if next != nil {
			t.Fatalf("FinishClaim chained a claim of %s for an expired owner; want none", next.Job.Key)
		}
		wantUnchanged(t, s, before, "a chained claim refused for an expired owner")
	})
}
