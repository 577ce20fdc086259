package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
	"github.com/idemrun/idemrun/store/storetest"
)

// endedJobs enqueues n jobs through db and ends them (succeeded) at now.
func endedJobs(t *testing.T, db *postgres.DB, n int, now time.Time) {
	t.Helper()
	var batch []*store.Job
	for i := range n {
		batch = append(batch, storetest.NewJob(fmt.Sprintf("ended-%03d", i), now))
	}
	if _, err := db.EnqueueMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: n})
	if err != nil || len(cs) != n {
		t.Fatalf("ClaimDue = %d claims, %v", len(cs), err)
	}
	for _, c := range cs {
		if _, _, err := db.FinishClaim(ctx, c, func(j *store.Job) error {
			j.State = store.StateSucceeded
			j.UpdatedAt = now
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSweepOneAtATime: a sweep on another node while one is under way
// deletes nothing and returns 0, 0, nil; the next sweep takes the rest,
// in batches of its limit.
func TestSweepOneAtATime(t *testing.T) {
	const n, limit = 30, 20
	now := storetest.T0()
	var armed atomic.Bool
	var during [3]int
	var duringErr error
	var b *postgres.DB
	a, u, schema := newStore(t, &postgres.Options{BeforeCommit: func(context.Context, uint32) {
		if armed.CompareAndSwap(true, false) {
			during[0], during[1], duringErr = b.Sweep(ctx, now.Add(time.Hour), now.Add(time.Hour), limit)
		}
	}})
	b = openStore(t, u, &postgres.Options{Schema: schema})
	endedJobs(t, a, n, now)

	armed.Store(true)
	jobs, keys, err := a.Sweep(ctx, now.Add(time.Hour), now.Add(-time.Hour), limit)
	if err != nil || jobs != limit || keys != 0 {
		t.Fatalf("Sweep = %d, %d, %v; want %d jobs deleted, their keys kept reserved", jobs, keys, err, limit)
	}
	if during[0] != 0 || during[1] != 0 || duringErr != nil {
		t.Errorf("a Sweep on another handle during the first = %d, %d, %v; want 0, 0, nil", during[0], during[1], duringErr)
	}
	if jobs, _, err := b.Sweep(ctx, now.Add(time.Hour), now.Add(-time.Hour), limit); err != nil || jobs != n-limit {
		t.Errorf("the next Sweep = %d jobs, %v; want the other %d", jobs, err, n-limit)
	}
	if _, keys, err := b.Sweep(ctx, now.Add(time.Hour), now.Add(time.Hour), limit); err != nil || keys != limit {
		t.Errorf("a Sweep past the key cutoff = %d keys, %v; want a batch of %d released", keys, err, limit)
	}
}

// TestSweepConcurrent: sweeps on several handles at once delete each
// ended job once between them.
func TestSweepConcurrent(t *testing.T) {
	const n, handles = 200, 4
	now := storetest.T0()
	a, u, schema := newStore(t, nil)
	endedJobs(t, a, n, now)
	dbs := []*postgres.DB{a}
	for range handles - 1 {
		dbs = append(dbs, openStore(t, u, &postgres.Options{Schema: schema}))
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	for _, db := range dbs {
		wg.Go(func() {
			// Until every job is gone: a sweep that finds another under
			// way returns at once.
			for i := 0; i < 10*n && total.Load() < n; i++ {
				jobs, _, err := db.Sweep(ctx, now.Add(time.Hour), now.Add(-time.Hour), 10)
				if err != nil {
					t.Error(err)
					return
				}
				total.Add(int64(jobs))
			}
		})
	}
	wg.Wait()
	if st, err := a.Stats(); err != nil || total.Load() != n || st[store.StateSucceeded] != 0 {
		t.Errorf("sweeps deleted %d jobs, Stats %v, %v; want each of the %d once", total.Load(), st, err, n)
	}
}
