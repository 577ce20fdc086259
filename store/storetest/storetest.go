package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// Store is what the suite tests: the whole backend contract.
type Store = store.Store

// Run runs the contract suite. open must return a new, empty store for the
// test it is given and arrange for the store to be checked and closed when
// that test ends (a store the test closed itself answers ErrClosed to
// Check: skip it); the subtests run in parallel, each with its own store.
func Run(t *testing.T, open func(t *testing.T) Store) {
	for _, tt := range suite() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open)
		})
	}
}

type suiteTest struct {
	name string
	fn   func(t *testing.T, open func(t *testing.T) Store)
}

// suite lists the contract tests; methodTests says which of them cover
// each method of Store.
func suite() []suiteTest {
	return []suiteTest{
		{"EveryMethod", testEveryMethod},
		{"LegalTable", testLegalTable},
		{"Transitions", testTransitions},
		{"ClaimFenced", testClaimFenced},
		{"FinishFenced", testFinishFenced},
		{"FinishRefusals", testFinishRefusals},
		{"FinishStaleClaim", testFinishStaleClaim},
		{"FinishNext", testFinishNext},
		{"FinishNextConcurrent", testFinishNextConcurrent},
		{"EnqueueRoundTrip", testEnqueueRoundTrip},
		{"EnqueueInvalid", testEnqueueInvalid},
		{"EnqueueDuplicateID", testEnqueueDuplicateID},
		{"EnqueueSameKeyConcurrent", testEnqueueSameKeyConcurrent},
		{"EnqueueManyMixed", testEnqueueManyMixed},
		{"EnqueueManyFunc", testEnqueueManyFunc},
		{"ClaimDueOrder", testClaimDueOrder},
		{"ClaimDueUnknown", testClaimDueUnknown},
		{"ClaimDueConcurrent", testClaimDueConcurrent},
		{"ClaimDueOwner", testClaimDueOwner},
		{"ClaimExpiredOwner", testClaimExpiredOwner},
		{"LeaseAlive", testLeaseAlive},
		{"Leases", testLeases},
		{"RescueNoLeases", testRescueNoLeases},
		{"RescueLeases", testRescueLeases},
		{"OldestDue", testOldestDue},
		{"Cancel", testCancel},
		{"Retry", testRetry},
		{"Resolve", testResolve},
		{"NotFound", testNotFound},
		{"ListPagination", testListPagination},
		{"ListFilters", testListFilters},
		{"ListSort", testListSort},
		{"ManualMany", testManualMany},
		{"Sweep", testSweep},
		{"SweepKeyReservations", testSweepKeyReservations},
		{"SensitiveNames", testSensitiveNames},
		{"Check", testCheck},
		{"Close", testClose},
		{"CountersMatchScan", testCountersMatchScan},
		{"HostPolicies", testHostPolicies},
		{"HostPolicyConcurrent", testHostPolicyConcurrent},
		{"HostCounts", testHostCounts},
		{"ClaimSkipHosts", testClaimSkipHosts},
		{"ClaimAdmit", testClaimAdmit},
		{"FinishNextHosts", testFinishNextHosts},
		{"FinishLater", testFinishLater},
		{"FinishLaterClose", testFinishLaterClose},
	}
}

// T0 is the suite's fixed starting time; tests step forward from it.
func T0() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }

// NewJob returns a valid new pending job for key, due at now: a fresh id,
// fingerprint "fp-"+key (set Fingerprint afterwards for another request), a
// POST to an unroutable local address with two headers and a body, 5
// attempts, a 15-minute deadline and a 10-second attempt timeout.
func NewJob(key string, now time.Time) *store.Job {
	return &store.Job{
		ID:          store.NewID(),
		Key:         key,
		Fingerprint: "fp-" + key,
		State:       store.StatePending,
		Request: store.Request{
			Method: "POST",
			URL:    "http://127.0.0.1:1/x",
			Header: []store.HeaderField{
				{Name: "Content-Type", Value: "application/json"},
				{Name: "X-Trace", Value: "b"},
				{Name: "X-Trace", Value: "a"},
			},
			Body: []byte(`{"amount":100,"key":"` + key + `"}`),
		},
		MaxAttempts:    5,
		DeadlineAfter:  15 * time.Minute,
		Deadline:       now.Add(15 * time.Minute),
		AttemptTimeout: 10 * time.Second,
		CreatedAt:      now,
		UpdatedAt:      now,
		NextRunAt:      now,
	}
}

var ctx = context.Background()

// enqueue stores j and fails the test unless it is new.
func enqueue(t *testing.T, s Store, j *store.Job) *store.Job {
	t.Helper()
	res, err := s.Enqueue(ctx, j)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", j.Key, err)
	}
	if res.Existing || res.Job == nil || res.Job.ID != j.ID {
		t.Fatalf("Enqueue(%s) = %+v; want the new job %s", j.Key, res, j.ID)
	}
	return res.Job
}

func get(t *testing.T, s Store, id string) *store.Job {
	t.Helper()
	j, err := s.Get(id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return j
}

func stats(t *testing.T, s Store) map[store.State]int64 {
	t.Helper()
	st, err := s.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// claim claims exactly the job id from state st at now, with no owner.
func claim(t *testing.T, s Store, st store.State, id string, now time.Time) store.Claim {
	t.Helper()
	return claimFor(t, s, st, id, "", now)
}

// claimFor claims exactly the job id from state st at now for owner, and
// checks the claim against the job it wrote.
func claimFor(t *testing.T, s Store, st store.State, id, owner string, now time.Time) store.Claim {
	t.Helper()
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: st, Now: now, Limit: 1, Owner: owner})
	if err != nil {
		t.Fatalf("ClaimDue(%s, owner %q): %v", st, owner, err)
	}
	if len(cs) != 1 || cs[0].Job.ID != id {
		t.Fatalf("ClaimDue(%s, %v, 1) = %d claims (%v); want job %s", st, now, len(cs), claimIDs(cs), id)
	}
	wantClaim(t, s, cs[0], owner)
	return cs[0]
}

// wantClaim fails unless c is held by owner and carries the job as
// stored: the claim's fence, attempt and owner are its job's.
func wantClaim(t *testing.T, s Store, c store.Claim, owner string) {
	t.Helper()
	j := c.Job
	if c.Owner != owner || j.Owner != owner || c.Fence != j.Fence || c.Attempt != j.Attempts || c.Fence == 0 {
		t.Errorf("claim of %s: owner %q, fence %d, attempt %d; its job: owner %q, fence %d, attempts %d; want owner %q on both, the job's nonzero fence and its attempts",
			j.Key, c.Owner, c.Fence, c.Attempt, j.Owner, j.Fence, j.Attempts, owner)
	}
	if stored := get(t, s, j.ID); !JobsEqual(stored, j) {
		t.Errorf("claim of %s: its job differs from the stored one:\n claim  %+v\n stored %+v", j.Key, normalize(j), normalize(stored))
	}
}

// register starts the lease of a new runner (a fresh id) at now.
func register(t *testing.T, s Store, now time.Time, ttl time.Duration) store.RunnerInfo {
	t.Helper()
	r := store.RunnerInfo{ID: store.NewID(), Workers: 2, Host: "storetest", PID: 4242}
	if err := s.Register(ctx, r, now, ttl); err != nil {
		t.Fatalf("Register(%s): %v", r.ID, err)
	}
	return r
}

func claimIDs(cs []store.Claim) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.Job.ID
	}
	return ids
}

// moveTo is a Finish function that sets the fields a runner sets when it
// moves a job to st at now.
func moveTo(st store.State, now time.Time) store.TransitionFunc {
	return func(j *store.Job) error {
		j.State = st
		j.UpdatedAt = now
		switch st {
		case store.StateUnknown:
			j.MayHaveEffect = true
			if j.UnknownSince.IsZero() {
				j.UnknownSince = now
			}
			j.NextRunAt = now
		case store.StatePending:
			j.NextRunAt = now
		case store.StateNeedsAttention:
			j.Reason = "storetest: could not confirm"
		case store.StateFailed:
			j.Reason = "storetest: rejected"
		}
		return nil
	}
}

// finishAt writes fn over the stored job id as a claim with this fence
// would: the job as stored now, with the attempt and owner it holds, and
// the fence given, which a stale writer has wrong.
func finishAt(s Store, id string, fence uint64, fn store.TransitionFunc) (*store.Job, error) {
	j, err := s.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		j, err = &store.Job{ID: id, State: store.StateRunning}, nil
	}
	if err != nil {
		return nil, err
	}
	c := store.ClaimOf(j)
	c.Fence = fence
	got, _, err := s.FinishClaim(ctx, c, fn, nil)
	return got, err
}

func finish(t *testing.T, s Store, id string, fence uint64, st store.State, now time.Time) *store.Job {
	t.Helper()
	j, err := finishAt(s, id, fence, moveTo(st, now))
	if err != nil {
		t.Fatalf("Finish(%s → %s): %v", id, st, err)
	}
	if j.State != st {
		t.Fatalf("Finish(%s → %s) returned state %s", id, st, j.State)
	}
	return j
}

// driveTo enqueues a job for key due at now and moves it into st through
// the public operations only, as a runner and a person would. Claims are
// made at now with no owner, so no other job of the store may be due
// earlier than now.
func driveTo(t *testing.T, s Store, key string, st store.State, now time.Time) *store.Job {
	t.Helper()
	return driveFor(t, s, key, st, "", now)
}

// driveFor is driveTo with the claims made for owner, which must hold a
// live lease at now.
func driveFor(t *testing.T, s Store, key string, st store.State, owner string, now time.Time) *store.Job {
	t.Helper()
	return driveJob(t, s, NewJob(key, now), st, owner, now)
}

// driveJob is driveFor with the job to enqueue given.
func driveJob(t *testing.T, s Store, j *store.Job, st store.State, owner string, now time.Time) *store.Job {
	t.Helper()
	j = enqueue(t, s, j)
	switch st {
	case store.StatePending:
		return get(t, s, j.ID)
	case store.StateCanceled:
		if _, err := s.Cancel(ctx, j.ID, now, "storetest", "drive"); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		return get(t, s, j.ID)
	}
	c := claimFor(t, s, store.StatePending, j.ID, owner, now)
	switch st {
	case store.StateRunning:
	case store.StateSucceeded, store.StateFailed, store.StateUnknown:
		finish(t, s, j.ID, c.Fence, st, now)
	case store.StateNeedsAttention:
		finish(t, s, j.ID, c.Fence, store.StateUnknown, now)
		c = claimFor(t, s, store.StateUnknown, j.ID, owner, now)
		finish(t, s, j.ID, c.Fence, store.StateNeedsAttention, now)
	default:
		t.Fatalf("driveTo: unknown state %q", st)
	}
	got := get(t, s, j.ID)
	if got.State != st {
		t.Fatalf("driveTo(%s): job is %s", st, got.State)
	}
	return got
}

// wantUnchanged fails unless the stored job still equals before.
func wantUnchanged(t *testing.T, s Store, before *store.Job, what string) {
	t.Helper()
	after := get(t, s, before.ID)
	if !JobsEqual(after, before) {
		t.Errorf("%s changed the job:\n got  %+v\n want %+v", what, after, before)
	}
}

func wantIllegal(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, store.ErrIllegalTransition) {
		t.Errorf("%s: err = %v; want errors.Is ErrIllegalTransition", what, err)
	}
}

// JobsEqual compares two jobs by value, times by instant (see normalize).
func JobsEqual(a, b *store.Job) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize returns a deep copy of j with every time in UTC and empty
// slices nil, so jobs that went through a backend's encoding compare equal
// to the jobs they came from.
func normalize(j *store.Job) store.Job {
	c := *j
	u := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC().Round(0)
	}
	c.CreatedAt, c.UpdatedAt, c.NextRunAt, c.Deadline = u(c.CreatedAt), u(c.UpdatedAt), u(c.NextRunAt), u(c.Deadline)
	c.FirstSentAt, c.UnknownSince = u(c.FirstSentAt), u(c.UnknownSince)
	c.Request.Header = append([]store.HeaderField(nil), j.Request.Header...)
	c.Request.Body = append([]byte(nil), j.Request.Body...)
	c.NoEffectStatuses = append([]int(nil), j.NoEffectStatuses...)
	c.History = append([]store.Event(nil), j.History...)
	for i := range c.History {
		c.History[i].Start, c.History[i].End = u(c.History[i].Start), u(c.History[i].End)
	}
	if len(c.Request.Header) == 0 {
		c.Request.Header = nil
	}
	if len(c.Request.Body) == 0 {
		c.Request.Body = nil
	}
	if len(c.NoEffectStatuses) == 0 {
		c.NoEffectStatuses = nil
	}
	if len(c.History) == 0 {
		c.History = nil
	}
	if j.Result != nil {
		r := *j.Result
		r.Body = append([]byte(nil), r.Body...)
		if len(r.Body) == 0 {
			r.Body = nil
		}
		c.Result = &r
	}
	return c
}
