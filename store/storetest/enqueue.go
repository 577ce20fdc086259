package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

func testEnqueueRoundTrip(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	j := NewJob("round-trip", now)
	j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "x-lower", Value: " spaced\tvalue "})
	j.Request.Body = []byte{0, 1, 2, 0xff, '\n', '"'}
	j.StatusURL = "http://127.0.0.1:1/status/{key}?job={id}"
	j.KeyTTL = 24 * time.Hour
	j.ReplaySafe = true
	j.NoEffectStatuses = []int{503, 409}
	j.KeyFormat = "structured"
	want := normalize(j)

	res, err := s.Enqueue(ctx, j)
	if err != nil || res.Existing {
		t.Fatalf("Enqueue = %+v, %v; want a new job", res, err)
	}
	// The store keeps its own copy: later changes by the caller are not stored.
	j.Request.Body[0] = 'X'
	j.Request.Header[0].Value = "changed"

	for name, got := range map[string]*store.Job{"result": res.Job, "Get": get(t, s, want.ID)} {
		if !JobsEqual(got, &want) {
			t.Errorf("%s:\n got  %+v\n want %+v", name, normalize(got), want)
		}
	}
	byKey, err := s.GetByKey("round-trip")
	if err != nil || !JobsEqual(byKey, &want) {
		t.Errorf("GetByKey = %+v, %v; want %+v", byKey, err, want)
	}

	// The same request (fingerprint) with another key format is not the
	// stored job: the format is part of what is sent.
	other := NewJob("round-trip", now.Add(time.Hour))
	if res, err := s.Enqueue(ctx, other); !errors.Is(err, store.ErrKeyConflict) {
		t.Errorf("Enqueue of the same fingerprint with the token key format = %+v, %v; want ErrKeyConflict (the stored job is structured)", res, err)
	}
	again := NewJob("round-trip", now.Add(time.Hour))
	again.KeyFormat = "structured"
	res, err = s.Enqueue(ctx, again)
	if err != nil || !res.Existing || res.Job == nil || res.Job.ID != want.ID {
		t.Fatalf("second Enqueue of the same request = %+v, %v; want Existing job %s", res, err, want.ID)
	}
	if !JobsEqual(res.Job, &want) {
		t.Errorf("Existing job:\n got  %+v\n want %+v", normalize(res.Job), want)
	}
	if _, err := s.Get(again.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(id of the duplicate) err = %v; want ErrNotFound", err)
	}
	if st := stats(t, s); st[store.StatePending] != 1 {
		t.Errorf("Stats = %v; want 1 pending", st)
	}
}

func testEnqueueInvalid(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	cases := []struct {
		name string
		edit func(j *store.Job)
	}{
		{"no id", func(j *store.Job) { j.ID = "" }},
		{"bad id", func(j *store.Job) { j.ID = "not-a-uuid" }},
		{"no key", func(j *store.Job) { j.Key = "" }},
		{"no fingerprint", func(j *store.Job) { j.Fingerprint = "" }},
		{"not pending", func(j *store.Job) { j.State = store.StateRunning }},
		{"no next run", func(j *store.Job) { j.NextRunAt = time.Time{} }},
		{"no created", func(j *store.Job) { j.CreatedAt = time.Time{} }},
	}
	for i, tc := range cases {
		j := NewJob(fmt.Sprintf("invalid-%d", i), now)
		tc.edit(j)
		res, err := s.Enqueue(ctx, j)
		if err == nil || errors.Is(err, store.ErrKeyConflict) {
			t.Errorf("Enqueue(%s) = %+v, %v; want a refusal", tc.name, res, err)
		}
		rs, err := s.EnqueueMany(ctx, []*store.Job{j})
		if err != nil || len(rs) != 1 || rs[0].Err == nil || rs[0].Job != nil {
			t.Errorf("EnqueueMany(%s) = %+v, %v; want one result with Err", tc.name, rs, err)
		}
	}
	if st := stats(t, s); !statsEqual(st, map[store.State]int64{}) {
		t.Errorf("Stats after refused enqueues = %v; want all zero", st)
	}
	if rs, err := s.EnqueueMany(ctx, nil); err != nil || len(rs) != 0 {
		t.Errorf("EnqueueMany(nil) = %v, %v; want no results", rs, err)
	}
}

// testEnqueueDuplicateID: a job id names one job. A second job that reuses
// an id under another key must be refused, not written over the first.
func testEnqueueDuplicateID(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	a := enqueue(t, s, NewJob("a", now))
	b := NewJob("b", now)
	b.ID = a.ID
	if res, err := s.Enqueue(ctx, b); err == nil {
		t.Errorf("Enqueue of a second job (key b) with id %s = nil error (existing %v); want a refusal", a.ID, res.Existing)
	}
	c := NewJob("c", now)
	c.ID = a.ID
	rs, err := s.EnqueueMany(ctx, []*store.Job{c})
	if err == nil && (len(rs) != 1 || rs[0].Err == nil) {
		t.Errorf("EnqueueMany of a second job (key c) with id %s: no refusal; want its result to carry Err", a.ID)
	}
	if got := get(t, s, a.ID); got.Key != "a" || !JobsEqual(got, a) {
		t.Errorf("job %s now has key %q; want it unchanged with key a", a.ID, got.Key)
	}
	for _, k := range []string{"b", "c"} {
		if j, err := s.GetByKey(k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetByKey(%s) = job %v, %v; want ErrNotFound", k, j != nil, err)
		}
	}
	if st := stats(t, s); st[store.StatePending] != 1 {
		t.Errorf("Stats = %v; want 1 pending", st)
	}
}

func testEnqueueSameKeyConcurrent(t *testing.T, open func(t *testing.T) Store) {
	const n = 50
	s := open(t)
	now := T0()
	run := func(key string, fp func(i int) string) ([]store.EnqueueResult, []error) {
		res := make([]store.EnqueueResult, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			j := NewJob(key, now)
			j.Fingerprint = fp(i)
			wg.Go(func() {
				<-start
				res[i], errs[i] = s.Enqueue(ctx, j)
			})
		}
		close(start)
		wg.Wait()
		return res, errs
	}

	t.Run("same request", func(t *testing.T) {
		res, errs := run("same", func(int) string { return "fp-same" })
		var winner string
		existing := 0
		for i := range n {
			switch {
			case errs[i] != nil:
				t.Errorf("Enqueue %d: %v", i, errs[i])
			case res[i].Existing:
				existing++
			case winner != "":
				t.Errorf("two new jobs for one key: %s and %s", winner, res[i].Job.ID)
			default:
				winner = res[i].Job.ID
			}
		}
		if winner == "" || existing != n-1 {
			t.Fatalf("winner %q, %d Existing; want one winner and %d Existing", winner, existing, n-1)
		}
		for i := range n {
			if res[i].Job == nil || res[i].Job.ID != winner {
				t.Errorf("result %d names job %v; want %s", i, res[i].Job, winner)
			}
		}
		if got := get(t, s, winner); got.Key != "same" {
			t.Errorf("winner key %q; want same", got.Key)
		}
	})

	t.Run("different requests", func(t *testing.T) {
		res, errs := run("diff", func(i int) string { return fmt.Sprintf("fp-%d", i) })
		var winner string
		conflicts := 0
		for i := range n {
			if errs[i] == nil {
				if winner != "" || res[i].Existing {
					t.Errorf("result %d = %+v; want exactly one new job", i, res[i])
				}
				winner = res[i].Job.ID
			}
		}
		if winner == "" {
			t.Fatalf("no Enqueue won the key")
		}
		for i := range n {
			if errs[i] == nil {
				continue
			}
			var kc *store.KeyConflictError
			if !errors.Is(errs[i], store.ErrKeyConflict) || !errors.As(errs[i], &kc) || kc.JobID != winner || kc.Key != "diff" {
				t.Errorf("Enqueue %d: err = %v; want *KeyConflictError naming job %s and key diff", i, errs[i], winner)
				continue
			}
			conflicts++
		}
		if conflicts != n-1 {
			t.Errorf("%d conflicts; want %d", conflicts, n-1)
		}
	})
	if st := stats(t, s); st[store.StatePending] != 2 {
		t.Errorf("Stats = %v; want 2 pending", st)
	}
}

// manyWays are the two batch enqueues, which keep the same per-job rules.
var manyWays = []struct {
	name string
	fn   func(s Store, jobs []*store.Job) ([]store.EnqueueResult, error)
}{
	{"EnqueueMany", func(s Store, jobs []*store.Job) ([]store.EnqueueResult, error) { return s.EnqueueMany(ctx, jobs) }},
	{"EnqueueManyFunc", func(s Store, jobs []*store.Job) ([]store.EnqueueResult, error) {
		return s.EnqueueManyFunc(ctx, len(jobs), func(i int) (*store.Job, error) { return jobs[i], nil })
	}},
}

func testEnqueueManyMixed(t *testing.T, open func(t *testing.T) Store) {
	for _, way := range manyWays {
		t.Run(way.name, func(t *testing.T) {
			t.Parallel()
			enqueueManyMixed(t, open(t), way.fn)
		})
	}
}

func enqueueManyMixed(t *testing.T, s Store, enqueueMany func(s Store, jobs []*store.Job) ([]store.EnqueueResult, error)) {
	now := T0()
	a := enqueue(t, s, NewJob("a", now))

	b := NewJob("b", now)
	aSame := NewJob("a", now)
	aOther := NewJob("a", now)
	aOther.Fingerprint = "fp-other"
	c := NewJob("c", now)
	cAgain := NewJob("c", now)
	bOther := NewJob("b", now)
	bOther.Fingerprint = "fp-other"
	invalid := NewJob("", now)
	d := NewJob("d", now)
	batch := []*store.Job{b, aSame, aOther, c, cAgain, bOther, invalid, d}

	rs, err := enqueueMany(s, batch)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	if len(rs) != len(batch) {
		t.Fatalf("EnqueueMany returned %d results; want %d", len(rs), len(batch))
	}
	type want struct {
		id       string // the job the result names; "" for none
		existing bool
		conflict string // the job a *KeyConflictError names
		refused  bool
	}
	wants := []want{
		{id: b.ID},
		{id: a.ID, existing: true},
		{conflict: a.ID},
		{id: c.ID},
		{id: c.ID, existing: true},
		{conflict: b.ID},
		{refused: true},
		{id: d.ID},
	}
	for i, w := range wants {
		r := rs[i]
		gotID := ""
		if r.Job != nil {
			gotID = r.Job.ID
		}
		var kc *store.KeyConflictError
		switch {
		case w.conflict != "":
			if !errors.As(r.Err, &kc) || kc.JobID != w.conflict || !errors.Is(r.Err, store.ErrKeyConflict) {
				t.Errorf("result %d: Err = %v; want a key conflict naming %s", i, r.Err, w.conflict)
			}
		case w.refused:
			if r.Err == nil || errors.Is(r.Err, store.ErrKeyConflict) {
				t.Errorf("result %d: Err = %v; want a refusal of the invalid job", i, r.Err)
			}
		default:
			if r.Err != nil || gotID != w.id || r.Existing != w.existing {
				t.Errorf("result %d = {job %s, existing %v, err %v}; want {job %s, existing %v}", i, gotID, r.Existing, r.Err, w.id, w.existing)
			}
		}
	}
	for _, j := range []*store.Job{a, b, c, d} {
		got, err := s.GetByKey(j.Key)
		if err != nil || got.ID != j.ID || got.Fingerprint != "fp-"+j.Key {
			t.Errorf("GetByKey(%s) = %+v, %v; want job %s", j.Key, got, err, j.ID)
		}
	}
	for _, j := range []*store.Job{aSame, aOther, cAgain, bOther, invalid} {
		if _, err := s.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s, key %q) err = %v; want ErrNotFound", j.ID, j.Key, err)
		}
	}
	if st := stats(t, s); st[store.StatePending] != 4 {
		t.Errorf("Stats = %v; want 4 pending", st)
	}
}

// testEnqueueManyFunc: an error from build stops the batch, and the jobs
// built before it stay stored. What becomes of the jobs after it is not
// said: a backend may have stored them (the error is then the failing
// job's own Err) or not (the error is then the call's).
func testEnqueueManyFunc(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	const n, bad = 5, 2
	var jobs []*store.Job
	for i := range n {
		jobs = append(jobs, NewJob(fmt.Sprintf("f-%d", i), now))
	}
	errBuild := errors.New("storetest: build refused")
	rs, err := s.EnqueueManyFunc(ctx, n, func(i int) (*store.Job, error) {
		if i == bad {
			return nil, errBuild
		}
		return jobs[i], nil
	})
	switch {
	case err != nil:
		if !errors.Is(err, errBuild) {
			t.Errorf("EnqueueManyFunc = %v; want build's error", err)
		}
	case len(rs) != n:
		t.Fatalf("EnqueueManyFunc = %d results, nil; want %d (or build's error)", len(rs), n)
	default:
		if !errors.Is(rs[bad].Err, errBuild) || rs[bad].Job != nil {
			t.Errorf("result %d = %+v; want build's error", bad, rs[bad])
		}
		for i := range bad {
			if r := rs[i]; r.Err != nil || r.Existing || r.Job == nil || r.Job.ID != jobs[i].ID {
				t.Errorf("result %d = %+v; want the new job %s", i, r, jobs[i].ID)
			}
		}
	}
	for i := range bad {
		if got, err := s.GetByKey(jobs[i].Key); err != nil || got.ID != jobs[i].ID {
			t.Errorf("GetByKey(%s) = %v, %v; want job %s, built before the error", jobs[i].Key, got, err, jobs[i].ID)
		}
	}

	rs, err = s.EnqueueManyFunc(ctx, 0, func(i int) (*store.Job, error) {
		t.Errorf("build(%d) called for an empty batch", i)
		return nil, nil
	})
	if err != nil || len(rs) != 0 {
		t.Errorf("EnqueueManyFunc(0) = %v, %v; want no results", rs, err)
	}
}

func testNotFound(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	enqueue(t, s, NewJob("present", now))
	for _, id := range []string{store.NewID(), "not-an-id", ""} {
		if _, err := s.Get(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) err = %v; want ErrNotFound", id, err)
		}
		if _, err := finishAt(s, id, 1, moveTo(store.StateSucceeded, now)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Finish(%q) err = %v; want ErrNotFound", id, err)
		}
		if _, err := s.Cancel(ctx, id, now, "t", ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Cancel(%q) err = %v; want ErrNotFound", id, err)
		}
		if _, err := s.Retry(ctx, id, now, "t", ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Retry(%q) err = %v; want ErrNotFound", id, err)
		}
		if _, err := s.Resolve(ctx, id, store.StateSucceeded, now, "t", ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Resolve(%q) err = %v; want ErrNotFound", id, err)
		}
	}
	if _, err := s.GetByKey("absent"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey(absent) err = %v; want ErrNotFound", err)
	}
}
