package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// testClaimFenced: a claim holds its job while the job's fence, attempt
// and owner are the claim's (Claim.Fenced, which backends check).
func testClaimFenced(t *testing.T, _ func(t *testing.T) Store) {
	j := NewJob("k", T0())
	j.State, j.Fence, j.Attempts, j.Owner = store.StateRunning, 7, 2, "runner-a"
	c := store.ClaimOf(j)
	if c.Job != j || c.Fence != 7 || c.Attempt != 2 || c.Owner != "runner-a" {
		t.Fatalf("ClaimOf = %+v; want the job's fence 7, attempt 2, owner runner-a", c)
	}
	if c.Fenced(j) {
		t.Errorf("the claim of a job is fenced off that job")
	}
	for name, change := range map[string]func(j *store.Job){
		"fence":   func(j *store.Job) { j.Fence++ },
		"attempt": func(j *store.Job) { j.Attempts++ },
		"owner":   func(j *store.Job) { j.Owner = "runner-b" },
	} {
		later := j.Clone()
		change(later)
		if !c.Fenced(later) {
			t.Errorf("claim not fenced off a job whose %s changed", name)
		}
	}
}

func testFinishFenced(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	j := driveTo(t, s, "k", store.StateRunning, now)
	if j.Fence == 0 {
		t.Fatalf("claimed job has fence 0; a claim must raise the fence")
	}
	for _, fence := range []uint64{j.Fence - 1, j.Fence + 1, 0} {
		_, err := finishAt(s, j.ID, fence, moveTo(store.StateSucceeded, now))
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("Finish with fence %d (job has %d): err = %v; want ErrFenced", fence, j.Fence, err)
		}
		wantUnchanged(t, s, j, "fenced Finish")
	}

	// A worker claims, the process crashes, recovery makes the job unknown
	// and a status query claims it again: the first worker is now stale.
	stale := j.Fence
	if n, err := s.Rescue(ctx, now.Add(time.Second), nil); err != nil || n != 1 {
		t.Fatalf("Rescue = %d, %v; want 1, nil", n, err)
	}
	c := claim(t, s, store.StateUnknown, j.ID, now.Add(2*time.Second))
	if c.Fence <= stale {
		t.Fatalf("second claim fence %d; want above %d", c.Fence, stale)
	}
	before := stats(t, s)
	_, err := finishAt(s, j.ID, stale, moveTo(store.StateSucceeded, now.Add(3*time.Second)))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale worker's Finish: err = %v; want ErrFenced", err)
	}
	if after := stats(t, s); !statsEqual(after, before) {
		t.Errorf("Stats after fenced Finish = %v; want %v", after, before)
	}
	wantUnchanged(t, s, c.Job, "stale worker's Finish")
	finish(t, s, j.ID, c.Fence, store.StateSucceeded, now.Add(3*time.Second))
}

func testFinishRefusals(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	j := driveTo(t, s, "k", store.StateRunning, now)
	errMine := errors.New("storetest: refused by fn")
	cases := []struct {
		name string
		fn   store.TransitionFunc
		is   error
	}{
		{"fn error", func(j *store.Job) error { j.State = store.StateSucceeded; return errMine }, errMine},
		{"key change", func(j *store.Job) error { j.Key = "other"; return nil }, nil},
		{"id change", func(j *store.Job) error { j.ID = store.NewID(); return nil }, nil},
		// Only a claim or a rescue moves the fence, and only a claim the
		// owner.
		{"fence change", func(j *store.Job) error { j.Fence++; return nil }, nil},
		{"owner change", func(j *store.Job) error { j.Owner = store.NewID(); return nil }, nil},
		// One key, one request, for life (P2).
		{"method change", func(j *store.Job) error { j.Request.Method = "PUT"; return nil }, nil},
		{"url change", func(j *store.Job) error { j.Request.URL += "?again"; return nil }, nil},
		{"header change", func(j *store.Job) error {
			j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "X-New", Value: "1"})
			return nil
		}, nil},
		{"header order", func(j *store.Job) error {
			h := j.Request.Header
			h[len(h)-1], h[len(h)-2] = h[len(h)-2], h[len(h)-1]
			return nil
		}, nil},
		{"body change", func(j *store.Job) error { j.Request.Body = append(j.Request.Body, 'x'); return nil }, nil},
		{"fingerprint change", func(j *store.Job) error { j.Fingerprint = "fp-other"; return nil }, nil},
		{"key format change", func(j *store.Job) error { j.KeyFormat = "structured"; return nil }, nil},
	}
	for _, tc := range cases {
		// Alone, and beside a legal move to succeeded, so that nothing
		// but the change itself can be the reason for the refusal.
		moved := func(j *store.Job) error {
			if err := moveTo(store.StateSucceeded, now)(j); err != nil {
				return err
			}
			return tc.fn(j)
		}
		for how, fn := range map[string]store.TransitionFunc{"": tc.fn, " and a move to succeeded": moved} {
			got, err := finishAt(s, j.ID, j.Fence, fn)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("Finish with %s%s = %v, %v; want refusal %v", tc.name, how, got, err, tc.is)
			}
			wantUnchanged(t, s, j, "Finish with "+tc.name+how)
		}
	}
	if _, err := s.GetByKey("other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey(other) after refused key change: err = %v; want ErrNotFound", err)
	}
	// Several refused writes later, the job still finishes.
	finish(t, s, j.ID, j.Fence, store.StateSucceeded, now)
}

// wantSpent fails unless err refuses a finish under a claim whose job is
// no longer held by it. A stale fence, attempt or owner is ErrFenced; a
// job that left the claimed state under the same fence (its claim's
// finish is written, or it was never claimed) may also be refused by the
// transition table.
func wantSpent(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrIllegalTransition) {
		t.Errorf("%s: err = %v; want ErrFenced (or ErrIllegalTransition)", what, err)
	}
}

// testFinishStaleClaim: FinishClaim checks the claim itself, not only the
// fence a caller passes: a claim whose attempt, owner or fence is not the
// job's is fenced, and a claim whose job has left running or unknown (its
// outcome is written) is refused. Nothing changes on a refusal.
func testFinishStaleClaim(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	a := register(t, s, now, time.Hour)
	b := register(t, s, now, time.Hour)
	j := enqueue(t, s, NewJob("k", now))
	c := claimFor(t, s, store.StatePending, j.ID, a.ID, now)
	held := get(t, s, j.ID)
	for name, change := range map[string]func(c *store.Claim){
		"an earlier attempt": func(c *store.Claim) { c.Attempt-- },
		"a later attempt":    func(c *store.Claim) { c.Attempt++ },
		"another owner":      func(c *store.Claim) { c.Owner = b.ID },
		"no owner":           func(c *store.Claim) { c.Owner = "" },
		"a later fence":      func(c *store.Claim) { c.Fence++ },
		"an earlier fence":   func(c *store.Claim) { c.Fence-- },
	} {
		stale := c
		change(&stale)
		got, next, err := s.FinishClaim(ctx, stale, moveTo(store.StateSucceeded, now), nil)
		if !errors.Is(err, store.ErrFenced) || got != nil || next != nil {
			t.Errorf("FinishClaim with %s = %v, %v, %v; want ErrFenced", name, got, next, err)
		}
		wantUnchanged(t, s, held, "FinishClaim with "+name)
	}

	// The claim's own outcome: back to pending (no effect). The claim is
	// spent; b's claim is the next attempt, and a's is stale.
	later := now.Add(time.Second)
	if got, _, err := s.FinishClaim(ctx, c, moveTo(store.StatePending, later), nil); err != nil || got.State != store.StatePending {
		t.Fatalf("FinishClaim(a's claim → pending) = %+v, %v", got, err)
	}
	pending := get(t, s, j.ID)
	_, _, err := s.FinishClaim(ctx, c, moveTo(store.StateSucceeded, later), nil)
	wantSpent(t, err, "a second FinishClaim under a's claim, the job pending")
	wantUnchanged(t, s, pending, "a second FinishClaim under a's claim")

	cb := claimFor(t, s, store.StatePending, j.ID, b.ID, later)
	if _, _, err := s.FinishClaim(ctx, c, moveTo(store.StateSucceeded, later), nil); !errors.Is(err, store.ErrFenced) {
		t.Errorf("FinishClaim under a's claim after b's claim: err = %v; want ErrFenced", err)
	}
	if got, _, err := s.FinishClaim(ctx, cb, moveTo(store.StateUnknown, later), nil); err != nil || got.State != store.StateUnknown {
		t.Fatalf("FinishClaim(b's claim → unknown) = %+v, %v", got, err)
	}
	unknown := get(t, s, j.ID)
	_, _, err = s.FinishClaim(ctx, cb, moveTo(store.StateSucceeded, later), nil)
	wantSpent(t, err, "a second FinishClaim under b's claim, the job unknown")
	wantUnchanged(t, s, unknown, "a second FinishClaim under b's claim")

	// A status query's claim, finished succeeded, is spent too.
	cq := claimFor(t, s, store.StateUnknown, j.ID, a.ID, later)
	if got, _, err := s.FinishClaim(ctx, cq, moveTo(store.StateSucceeded, later), nil); err != nil || got.State != store.StateSucceeded {
		t.Fatalf("FinishClaim(status claim → succeeded) = %+v, %v", got, err)
	}
	done := get(t, s, j.ID)
	for _, to := range []store.State{store.StateSucceeded, store.StateFailed, store.StatePending} {
		_, _, err := s.FinishClaim(ctx, cq, moveTo(to, later), nil)
		wantSpent(t, err, "FinishClaim(→ "+string(to)+") under the spent status claim, the job succeeded")
		wantUnchanged(t, s, done, "FinishClaim under the spent status claim")
	}

	// A job never claimed is held by no claim, not even the one ClaimOf
	// makes of it.
	p := enqueue(t, s, NewJob("never-claimed", now))
	_, _, err = s.FinishClaim(ctx, store.ClaimOf(p), moveTo(store.StateSucceeded, later), nil)
	wantSpent(t, err, "FinishClaim of a pending job never claimed")
	wantUnchanged(t, s, p, "FinishClaim of a pending job never claimed")
}

// chainPlan is a NextClaim like a runner's: an attempt event for a
// pending job, a status query lease for an unknown one.
func chainPlan(owner string, now time.Time, lease time.Duration) *store.NextClaim {
	return &store.NextClaim{
		Now:   now,
		Owner: owner,
		Pending: func(j *store.Job) {
			j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
		},
		Unknown: func(j *store.Job) { j.NextRunAt = now.Add(lease) },
	}
}

// testFinishNext: with a NextClaim, FinishClaim writes the outcome and
// claims the due job with the earliest NextRunAt, pending or unknown, for
// next.Owner, prepared by the prepare of its state and stored as
// returned; it claims nothing when nothing is due, and nothing when the
// finish is refused.
func testFinishNext(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	const lease = 30 * time.Second
	r := register(t, s, now.Add(-2*time.Hour), 4*time.Hour)
	plan := chainPlan(r.ID, now, lease)

	// u: unknown, due 2s ago. w: the job a worker holds. p0 pending due
	// 3s ago, p pending due 1s ago; notDue pending and u2 unknown, both
	// due in an hour.
	u := driveTo(t, s, "u", store.StateUnknown, now.Add(-2*time.Second))
	u2 := driveTo(t, s, "u2", store.StateUnknown, now.Add(-90*time.Minute))
	cu2 := claim(t, s, store.StateUnknown, u2.ID, now.Add(-90*time.Minute))
	if _, err := finishAt(s, u2.ID, cu2.Fence, func(j *store.Job) error { j.NextRunAt = now.Add(time.Hour); return nil }); err != nil {
		t.Fatalf("FinishClaim(u2, in progress): %v", err)
	}
	w := enqueue(t, s, NewJob("w", now.Add(-time.Hour)))
	cw := claim(t, s, store.StatePending, w.ID, now.Add(-time.Hour))
	p0 := NewJob("p0", now.Add(-3*time.Second))
	p := NewJob("p", now.Add(-time.Second))
	notDue := NewJob("not-due", now.Add(time.Hour))
	for _, j := range []*store.Job{p0, p, notDue} {
		enqueue(t, s, j)
	}
	idle := []*store.Job{get(t, s, notDue.ID), get(t, s, u2.ID)}

	step := func(c store.Claim, wantID string) *store.Claim {
		t.Helper()
		got, next, err := s.FinishClaim(ctx, c, moveTo(store.StateSucceeded, now), plan)
		if err != nil || got == nil || got.State != store.StateSucceeded || got.ID != c.Job.ID {
			t.Fatalf("FinishClaim(%s) = %+v, %v; want %s succeeded", c.Job.Key, got, err, c.Job.Key)
		}
		if stored := get(t, s, c.Job.ID); !JobsEqual(stored, got) {
			t.Errorf("FinishClaim(%s) returned %+v; stored %+v", c.Job.Key, normalize(got), normalize(stored))
		}
		if wantID == "" {
			if next != nil {
				t.Fatalf("FinishClaim(%s) chained a claim of %s; want none (nothing due)", c.Job.Key, next.Job.Key)
			}
			return nil
		}
		if next == nil || next.Job.ID != wantID {
			t.Fatalf("FinishClaim(%s) chained %v; want job %s", c.Job.Key, next, wantID)
		}
		wantClaim(t, s, *next, r.ID)
		return next
	}

	// p0 (3s ago, pending) before u (2s ago, unknown) before p (1s ago).
	c := step(cw, p0.ID)
	if j := c.Job; j.State != store.StateRunning || j.Attempts != 1 || !j.FirstSentAt.Equal(now) || !j.UpdatedAt.Equal(now) || j.LastEvent(store.EventAttempt) == nil {
		t.Errorf("p0 chained: %s, attempts %d, FirstSentAt %v, UpdatedAt %v, attempt event %v; want running, 1, %v, %v, the Pending prepare's event",
			j.State, j.Attempts, j.FirstSentAt, j.UpdatedAt, j.LastEvent(store.EventAttempt), now, now)
	}
	c = step(*c, u.ID)
	if j := c.Job; j.State != store.StateUnknown || j.StatusQueries != u.StatusQueries+1 || j.Attempts != u.Attempts || j.Fence <= u.Fence ||
		!j.NextRunAt.Equal(now.Add(lease)) || j.LastEvent(store.EventAttempt) != nil {
		t.Errorf("u chained: %s, queries %d, attempts %d, fence %d (was %d), NextRunAt %v, attempt event %v; want unknown, %d, %d, higher, the Unknown prepare's %v, none",
			j.State, j.StatusQueries, j.Attempts, j.Fence, u.Fence, j.NextRunAt, j.LastEvent(store.EventAttempt), u.StatusQueries+1, u.Attempts, now.Add(lease))
	}
	c = step(*c, p.ID)
	// Nothing else is due: a plain finish result, no claim.
	step(*c, "")
	for _, j := range idle {
		wantUnchanged(t, s, j, "chained claims at "+now.String())
	}

	// A refused finish claims nothing, whatever is due: a stale claim, and
	// a finish its fn refuses.
	q := enqueue(t, s, NewJob("q", now.Add(-time.Second)))
	got, next, err := s.FinishClaim(ctx, cw, moveTo(store.StateFailed, now), plan)
	if !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrIllegalTransition) || got != nil || next != nil {
		t.Errorf("FinishClaim under w's spent claim = %v, %v, %v; want a refusal, no claim", got, next, err)
	}
	wantUnchanged(t, s, q, "a refused finish's chained claim")
	cq := claim(t, s, store.StatePending, q.ID, now)
	heldQ := get(t, s, q.ID)
	q2 := enqueue(t, s, NewJob("q2", now.Add(-time.Second)))
	errMine := errors.New("storetest: refused by fn")
	got, next, err = s.FinishClaim(ctx, cq, func(j *store.Job) error { return errMine }, plan)
	if !errors.Is(err, errMine) || got != nil || next != nil {
		t.Errorf("FinishClaim with fn's refusal = %v, %v, %v; want fn's error, no claim", got, next, err)
	}
	wantUnchanged(t, s, heldQ, "a finish fn refused")
	wantUnchanged(t, s, q2, "the chained claim of a finish fn refused")
	_, next, err = s.FinishClaim(ctx, cq, moveTo(store.StateCanceled, now), plan)
	wantIllegal(t, err, "FinishClaim running → canceled")
	if next != nil {
		t.Errorf("FinishClaim refused by the transition table chained %s; want no claim", next.Job.Key)
	}
	wantUnchanged(t, s, q2, "the chained claim of a finish the table refused")
}

// testFinishNextConcurrent: workers that chain claims through FinishClaim
// and fall back to ClaimDue never claim a job twice, and together claim
// every job.
func testFinishNextConcurrent(t *testing.T, open func(t *testing.T) Store) {
	const (
		jobs    = 200
		workers = 8
	)
	s := open(t)
	now := T0()
	batch := enqueueDue(t, s, "c", jobs, now)
	owners := make([]string, workers)
	for w := range owners {
		owners[w] = register(t, s, now, time.Hour).ID
	}
	claimConcurrently(t, batch, workers, func(w int) (ids []string, err error) {
		owner := owners[w]
		for range jobs { // bounded: each round claims at least one job or stops
			cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1, Owner: owner})
			if err != nil || len(cs) == 0 {
				return ids, err
			}
			for c := &cs[0]; c != nil; {
				if c.Owner != owner || c.Job.Owner != owner {
					return ids, fmt.Errorf("claim of %s held by %q (job says %q); want %s", c.Job.Key, c.Owner, c.Job.Owner, owner)
				}
				ids = append(ids, c.Job.ID)
				if _, c, err = s.FinishClaim(ctx, *c, moveTo(store.StateSucceeded, now), &store.NextClaim{Now: now, Owner: owner}); err != nil {
					return ids, err
				}
			}
		}
		return ids, nil
	})
	if st := stats(t, s); st[store.StateSucceeded] != jobs || st[store.StatePending] != 0 || st[store.StateRunning] != 0 {
		t.Errorf("Stats = %v; want %d succeeded", st, jobs)
	}
}
