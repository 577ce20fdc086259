package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/storetest"
)

// Finishes that arrive together share transactions: a stale one among
// them is refused alone (ErrFenced, no next claim), the others are
// written, and their next claims are distinct due jobs held by their
// runner, earliest first but for the one row the stale finish's group
// locked for it and left (another group, skipping the locked row,
// claims past it; the row stays due).
func TestFinishGroupStaleAmongHeld(t *testing.T) {
	db, _, _ := newStore(t, nil)
	now := storetest.T0()
	const claimed, extra = 40, 60
	var jobs []*store.Job
	for i := range claimed + extra {
		j := storetest.NewJob(fmt.Sprintf("g-%03d", i), now)
		j.NextRunAt = now.Add(-time.Duration(claimed+extra-i) * time.Millisecond)
		jobs = append(jobs, j)
	}
	if _, err := db.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	owner := store.RunnerInfo{ID: store.NewID(), Workers: claimed}
	if err := db.Register(ctx, owner, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: claimed, Owner: owner.ID})
	if err != nil || len(cs) != claimed {
		t.Fatalf("ClaimDue = %d claims, %v; want %d", len(cs), err, claimed)
	}
	// A claim whose attempt the stored job does not have: stale, though
	// its own copy of the job agrees with it.
	stale := cs[7]
	stale.Attempt++
	stale.Job = stale.Job.Clone()
	stale.Job.Attempts++
	cs[7] = stale

	finish := func(j *store.Job) error {
		j.State, j.UpdatedAt = store.StateSucceeded, now
		return nil
	}
	type out struct {
		next *store.Claim
		err  error
	}
	res := make([]out, claimed)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, n, err := db.FinishClaim(ctx, c, finish, &store.NextClaim{Now: now, Owner: owner.ID})
			res[i] = out{n, err}
		}()
	}
	close(start)
	wg.Wait()

	seen := map[string]bool{}
	for i, r := range res {
		if i == 7 {
			if !errors.Is(r.err, store.ErrFenced) || r.next != nil {
				t.Errorf("stale finish: next %v, err %v; want no claim and ErrFenced", r.next, r.err)
			}
			continue
		}
		if r.err != nil {
			t.Errorf("finish %d: %v", i, r.err)
			continue
		}
		if r.next == nil {
			t.Errorf("finish %d claimed nothing next, with %d jobs due", i, extra)
			continue
		}
		if seen[r.next.Job.ID] || r.next.Owner != owner.ID || r.next.Job.State != store.StateRunning {
			t.Errorf("next claim of %s: seen before %v, owner %q, state %s", r.next.Job.Key, seen[r.next.Job.ID], r.next.Owner, r.next.Job.State)
		}
		seen[r.next.Job.ID] = true
	}
	// The next claims took the earliest due jobs, but for at most one.
	var passed []string
	for i := claimed; i < claimed+claimed-1; i++ {
		if !seen[jobs[i].ID] {
			passed = append(passed, jobs[i].Key)
		}
	}
	if len(passed) > 1 {
		t.Errorf("the next claims passed over %v; want the earliest due jobs but for at most one", passed)
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st[store.StateSucceeded] != claimed-1 || st[store.StateRunning] != claimed || st[store.StatePending] != extra-claimed+1 {
		t.Errorf("Stats = %v; want %d succeeded, %d running, %d pending", st, claimed-1, claimed, extra-claimed+1)
	}
}

// Grouped finishes honour each one's SkipHosts and Admit in their next
// claims: the group's shared search passes over, for each finish, the
// jobs of the hosts it skips or Admit refuses, and leaves them due.
func TestFinishGroupSkipsHosts(t *testing.T) {
	db, _, _ := newStore(t, nil)
	now := storetest.T0()
	const claimed, skipped, open = 30, 60, 30
	var jobs []*store.Job
	for i := range claimed + skipped + open {
		j := storetest.NewJob(fmt.Sprintf("h-%03d", i), now)
		j.NextRunAt = now.Add(-time.Duration(claimed+skipped+open-i) * time.Millisecond)
		switch {
		case i >= claimed && i < claimed+skipped && i%2 == 0:
			j.Request.URL = "http://skip.example.com/x" // older than every open job
		case i >= claimed && i < claimed+skipped:
			j.Request.URL = "http://refused.example.com/x"
		}
		jobs = append(jobs, j)
	}
	if _, err := db.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	owner := store.RunnerInfo{ID: store.NewID(), Workers: claimed}
	if err := db.Register(ctx, owner, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: claimed, Owner: owner.ID})
	if err != nil || len(cs) != claimed {
		t.Fatalf("ClaimDue = %d claims, %v; want %d", len(cs), err, claimed)
	}
	finish := func(j *store.Job) error {
		j.State, j.UpdatedAt = store.StateSucceeded, now
		return nil
	}
	admit := func(host string) bool { return host != "refused.example.com" }
	next := make([]*store.Claim, claimed)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			<-start
			_, n, err := db.FinishClaim(ctx, c, finish, &store.NextClaim{Now: now, Owner: owner.ID, SkipHosts: []string{"skip.example.com"}, Admit: admit})
			if err != nil {
				t.Errorf("finish %d: %v", i, err)
			}
			next[i] = n
		})
	}
	close(start)
	wg.Wait()
	got := 0
	for _, n := range next {
		if n == nil {
			continue
		}
		got++
		if h := store.HostOf(n.Job.Request.URL); h == "skip.example.com" || h == "refused.example.com" {
			t.Errorf("a grouped finish claimed %s of %s, a host it skips or Admit refuses", n.Job.Key, h)
		}
	}
	if got == 0 {
		t.Errorf("no grouped finish claimed a job of the open host")
	}
	for _, j := range jobs[claimed : claimed+skipped] {
		if g, err := db.Get(j.ID); err != nil || g.State != store.StatePending {
			t.Errorf("%s of a skipped host: %v, %v; want pending", j.Key, g.State, err)
		}
	}
}
