package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// randomRun is the shared memory of the random workers: what they stored
// and claimed, and which states their writes reached.
type randomRun struct {
	clock atomic.Int64 // nanoseconds after T0

	mu      sync.Mutex
	ids     []string          // every id ever stored (some swept since)
	claimed []string          // ids claimed at least once
	fences  map[string]uint64 // latest claim fence per id
	reached map[store.State]bool
}

func (rr *randomRun) now(r *rand.Rand) time.Time {
	return T0().Add(time.Duration(rr.clock.Add(int64(r.IntN(2000)) * int64(time.Millisecond))))
}

func (rr *randomRun) noteJob(j *store.Job, isNew bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if isNew {
		rr.ids = append(rr.ids, j.ID)
	}
	rr.reached[j.State] = true
}

func (rr *randomRun) noteClaims(cs []store.Claim) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, c := range cs {
		if _, ok := rr.fences[c.Job.ID]; !ok {
			rr.claimed = append(rr.claimed, c.Job.ID)
		}
		rr.fences[c.Job.ID] = c.Fence
		rr.reached[c.Job.State] = true
	}
}

// pick returns a stored id (or, rarely, one never stored); from claimed
// ones when claimedOnly, with its latest fence.
func (rr *randomRun) pick(r *rand.Rand, claimedOnly bool) (string, uint64) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	list := rr.ids
	if claimedOnly {
		list = rr.claimed
	}
	if len(list) == 0 || r.IntN(30) == 0 {
		return store.NewID(), 0
	}
	id := list[r.IntN(len(list))]
	return id, rr.fences[id]
}

// pickNew returns one of the ids stored last (or one never stored when
// none is).
func (rr *randomRun) pickNew(r *rand.Rand) string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if len(rr.ids) == 0 {
		return store.NewID()
	}
	return rr.ids[len(rr.ids)-1-r.IntN(min(8, len(rr.ids)))]
}

// testCountersMatchScan runs ~2000 random operations of every kind, legal
// and illegal, from 16 workers with seeded randomness, in 4 phases; after
// each phase the counters must equal a full scan, and at the end the
// backend's own check must find nothing. Workers run concurrently so that
// batched commits see every kind of neighbour.
func testCountersMatchScan(t *testing.T, open func(t *testing.T) Store) {
	const (
		workers = 16
		phases  = 4
		perStep = 32 // ops per worker per phase: 16 × 4 × 32 ≈ 2000
		keys    = 400
	)
	s := open(t)
	rr := &randomRun{fences: map[string]uint64{}, reached: map[store.State]bool{}}
	var tally [workers][11]int
	rands := make([]*rand.Rand, workers)
	for w := range rands {
		rands[w] = rand.New(rand.NewPCG(2030, uint64(w)))
	}
	for phase := range phases {
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range perStep {
					if err := randomOp(s, rr, rands[w], keys, &tally[w]); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("phase %d, worker %d: %v", phase, w, err)
			}
		}
		countersMatchScan(t, s)
	}
	var sum [11]int
	for w := range tally {
		for k := range sum {
			sum[k] += tally[w][k]
		}
	}
	t.Logf("ops: enqueue %d, many %d, claim %d, claim-unknown %d, finish %d, recover %d, cancel %d, retry %d, resolve %d, sweep %d, read %d",
		sum[0], sum[1], sum[2], sum[3], sum[4], sum[5], sum[6], sum[7], sum[8], sum[9], sum[10])
	for _, st := range store.States() {
		if !rr.reached[st] {
			t.Errorf("no successful write reached %s; the random mix no longer exercises it (reached %v)", st, rr.reached)
		}
	}
	rep, err := s.Check()
	if err != nil || !rep.OK() {
		t.Fatalf("Check = %+v, %v", rep, err)
	}
}

// randomOp runs one random operation and returns an error only when the
// store answered in a way no backend may.
func randomOp(s Store, rr *randomRun, r *rand.Rand, keys int, tally *[11]int) error {
	allowed := func(err error, ok ...error) error {
		if err == nil {
			return nil
		}
		for _, a := range ok {
			if errors.Is(err, a) {
				return nil
			}
		}
		return fmt.Errorf("unexpected error: %w", err)
	}
	now := rr.now(r)
	newJob := func() *store.Job {
		j := NewJob(fmt.Sprintf("k-%d", r.IntN(keys)), now)
		if r.IntN(5) == 0 {
			j.Fingerprint = "fp-other"
		}
		j.NextRunAt = now.Add(time.Duration(r.IntN(5000)) * time.Millisecond)
		return j
	}
	op := r.IntN(100)
	switch {
	case op < 20:
		tally[0]++
		j := newJob()
		res, err := s.Enqueue(ctx, j)
		if err == nil {
			rr.noteJob(res.Job, !res.Existing)
		}
		return allowed(err, store.ErrKeyConflict)
	case op < 25:
		tally[1]++
		var batch []*store.Job
		for range 1 + r.IntN(6) {
			batch = append(batch, newJob())
		}
		rs, err := s.EnqueueMany(ctx, batch)
		if err != nil {
			return allowed(err)
		}
		if len(rs) != len(batch) {
			return fmt.Errorf("EnqueueMany of %d jobs gave %d results", len(batch), len(rs))
		}
		for _, res := range rs {
			if res.Err == nil {
				rr.noteJob(res.Job, !res.Existing)
			} else if err := allowed(res.Err, store.ErrKeyConflict); err != nil {
				return err
			}
		}
	case op < 40:
		tally[2]++
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1 + r.IntN(4), Prepare: func(j *store.Job) {
			j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
		}})
		rr.noteClaims(cs)
		return allowed(err)
	case op < 47:
		tally[3]++
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now, Limit: 1 + r.IntN(3), Prepare: func(j *store.Job) {
			j.NextRunAt = now.Add(30 * time.Second)
		}})
		rr.noteClaims(cs)
		return allowed(err)
	case op < 72:
		tally[4]++
		id, fence := rr.pick(r, r.IntN(10) < 8)
		switch r.IntN(10) {
		case 0:
			fence--
		case 1:
			fence = uint64(r.IntN(3))
		}
		to := store.States()[r.IntN(len(store.States()))]
		next := now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		j, err := finishAt(s, id, fence, func(j *store.Job) error {
			if err := moveTo(to, now)(j); err != nil {
				return err
			}
			if to == store.StatePending || to == store.StateUnknown {
				j.NextRunAt = next
			}
			return nil
		})
		if err == nil {
			rr.noteJob(j, false)
		}
		return allowed(err, store.ErrIllegalTransition, store.ErrFenced, store.ErrNotFound)
	case op < 75:
		tally[5]++
		_, err := s.Rescue(ctx, now, nil)
		return allowed(err)
	case op < 81:
		tally[6]++
		// Half the cancels aim at the newest jobs, which are the likeliest
		// to be still pending (claims take the older ones first).
		id := rr.pickNew(r)
		if r.IntN(2) == 0 {
			id, _ = rr.pick(r, false)
		}
		j, err := s.Cancel(ctx, id, now, "prop", "")
		if err == nil {
			rr.noteJob(j, false)
		}
		return allowed(err, store.ErrIllegalTransition, store.ErrNotFound)
	case op < 86:
		tally[7]++
		id, _ := rr.pick(r, true)
		j, err := s.Retry(ctx, id, now, "prop", "")
		if err == nil {
			rr.noteJob(j, false)
		}
		return allowed(err, store.ErrIllegalTransition, store.ErrNotFound)
	case op < 91:
		tally[8]++
		id, _ := rr.pick(r, true)
		as := []store.State{store.StateSucceeded, store.StateFailed}[r.IntN(2)]
		j, err := s.Resolve(ctx, id, as, now, "prop", "")
		if err == nil {
			rr.noteJob(j, false)
		}
		return allowed(err, store.ErrIllegalTransition, store.ErrNotFound)
	case op < 93:
		tally[9]++
		cutoff := now.Add(-time.Duration(r.IntN(600)) * time.Second)
		_, _, err := s.Sweep(ctx, cutoff, cutoff, 1+r.IntN(10))
		return allowed(err)
	default:
		tally[10]++
		id, _ := rr.pick(r, false)
		j, err := s.Get(id)
		if err != nil {
			return allowed(err, store.ErrNotFound)
		}
		// Other workers may sweep the job and reuse its key meanwhile, so
		// the two reads are compared only between phases.
		_, err = s.GetByKey(j.Key)
		return allowed(err, store.ErrNotFound)
	}
	return nil
}

// countersMatchScan fails unless Stats equals the per-state counts of a
// full List, with and without a state filter, and returns them. Nothing
// may write meanwhile.
func countersMatchScan(t *testing.T, s Store) map[store.State]int64 {
	t.Helper()
	st := stats(t, s)
	var total int64
	for _, n := range st {
		total += n
	}
	all := listAll(t, s, store.ListFilter{Limit: 100}, int(total)+100)
	scan := map[store.State]int64{}
	for _, j := range all {
		scan[j.State]++
	}
	if !statsEqual(st, scan) {
		t.Fatalf("Stats = %v; a full scan counts %v", st, scan)
	}
	for _, j := range all {
		byKey, err := s.GetByKey(j.Key)
		if err != nil || byKey.ID != j.ID {
			t.Fatalf("GetByKey(%q) = %v, %v; List says job %s holds the key", j.Key, byKey, err, j.ID)
		}
		if byID := get(t, s, j.ID); !JobsEqual(byID, j) {
			t.Fatalf("Get(%s) = %+v; List gave %+v", j.ID, byID, j)
		}
	}
	for _, state := range store.States() {
		if n := int64(len(listAll(t, s, store.ListFilter{States: []store.State{state}, Limit: 100}, int(total)+100))); n != st[state] {
			t.Fatalf("List(%s) = %d jobs; Stats says %d", state, n, st[state])
		}
	}
	return st
}
