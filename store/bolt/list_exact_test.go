package bolt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// unknownJobs stores n jobs in unknown, job i due at T0+i s, and returns
// their ids.
func unknownJobs(t *testing.T, db *bolt.DB, n int) map[string]bool {
	t.Helper()
	t0 := storetest.T0()
	all := map[string]bool{}
	for i := range n {
		if _, err := db.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("u-%02d", i), t0)); err != nil {
			t.Fatal(err)
		}
		cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: t0, Limit: 1})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim: %v %v", cs, err)
		}
		at := t0.Add(time.Duration(i) * time.Second)
		if _, err := db.Finish(ctx, cs[0].Job.ID, cs[0].Fence, func(j *store.Job) error {
			j.State, j.MayHaveEffect, j.UnknownSince, j.NextRunAt, j.UpdatedAt = store.StateUnknown, true, at, at, at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		all[cs[0].Job.ID] = true
	}
	return all
}

// Without a state filter, list pages walk job ids, which never change:
// jobs leased for their status query (their next_run_at moved, their
// state kept) between two pages are still each on exactly one page. (With
// a state filter pages walk the state's index by next_run_at, and such a
// job may move across the cursor: documented on ListFilter.Cursor.)
func TestUnfilteredListIsExactWhileJobsAreRescheduled(t *testing.T) {
	db, _ := newDB(t, nil)
	all := unknownJobs(t, db, 30)
	now := storetest.T0().Add(time.Minute)
	seen := map[string]int{}
	leased := 0
	f := store.ListFilter{Limit: 10}
	for page := 0; ; page++ {
		p, err := db.List(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			seen[j.ID]++
		}
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
		// Between pages: lease five unknown jobs (next_run_at later).
		cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now, Limit: 5, Prepare: func(j *store.Job) { j.NextRunAt = now.Add(time.Minute) }})
		if err != nil {
			t.Fatal(err)
		}
		leased += len(cs)
		now = now.Add(2 * time.Minute)
	}
	if leased == 0 {
		t.Fatal("no job was leased between pages; the test proves nothing")
	}
	for id := range all {
		if seen[id] != 1 {
			t.Errorf("job %s listed %d times; want exactly once", id, seen[id])
		}
	}
}
