package bolt_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// benchDB opens a store for a benchmark; no Check at the end, which would
// read every job.
func benchDB(b *testing.B) *bolt.DB {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "idemrun.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func reportCommits(b *testing.B, db *bolt.DB, commits0 uint64) {
	commits, _ := db.Counters()
	b.ReportMetric(float64(commits-commits0)/float64(b.N), "commits/op")
}

// BenchmarkEnqueue measures durable enqueues from many goroutines; group
// commit shows as commits/op well below 1.
func BenchmarkEnqueue(b *testing.B) {
	db := benchDB(b)
	now := storetest.T0()
	var seq atomic.Uint64
	commits0, _ := db.Counters()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			j := storetest.NewJob(fmt.Sprintf("bench-%d", seq.Add(1)), now)
			if _, err := db.Enqueue(ctx, j); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportCommits(b, db, commits0)
}

// BenchmarkClaimFinish measures one worker's claim and finish of one job:
// two commits, the write-ahead record and the outcome.
func BenchmarkClaimFinish(b *testing.B) {
	db := benchDB(b)
	now := storetest.T0()
	seedPending(b, db, b.N, now)
	done := succeededAt(now)
	commits0, _ := db.Counters()
	b.ResetTimer()
	for range b.N {
		cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
		if err != nil || len(cs) != 1 {
			b.Fatalf("ClaimDue = %d, %v", len(cs), err)
		}
		if _, err := db.Finish(ctx, cs[0].Job.ID, cs[0].Fence, done); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCommits(b, db, commits0)
}

// seedPending enqueues n pending jobs due at now, 1,000 per transaction.
func seedPending(b *testing.B, db *bolt.DB, n int, now time.Time) {
	b.Helper()
	for i := 0; i < n; i += 1000 {
		var batch []*store.Job
		for k := i; k < min(i+1000, n); k++ {
			batch = append(batch, storetest.NewJob(fmt.Sprintf("bench-%d", k), now))
		}
		if _, err := db.EnqueueMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// succeededAt is an outcome write that ends a job succeeded at now.
func succeededAt(now time.Time) store.TransitionFunc {
	return func(j *store.Job) error {
		j.State = store.StateSucceeded
		j.UpdatedAt = now
		return nil
	}
}

// BenchmarkFinishClaimChained is a serial worker's cycle with chained claims:
// each outcome write claims the next job in the same commit.
func BenchmarkFinishClaimChained(b *testing.B) {
	db := benchDB(b)
	now := storetest.T0()
	seedPending(b, db, b.N+1, now)
	done := succeededAt(now)
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		b.Fatalf("ClaimDue = %d, %v", len(cs), err)
	}
	c := cs[0]
	commits0, _ := db.Counters()
	b.ResetTimer()
	for range b.N {
		_, next, err := db.FinishClaim(ctx, c, done, &store.NextClaim{Now: now})
		if err != nil || next == nil {
			b.Fatalf("FinishClaim = %v, %v; want the next job claimed", next, err)
		}
		c = *next
	}
	b.StopTimer()
	reportCommits(b, db, commits0)
}

// BenchmarkRawUpdate is one bare bbolt Update with one Put: the floor that
// the store's costs are measured against.
func BenchmarkRawUpdate(b *testing.B) {
	bdb, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bdb.Close() })
	if err := bdb.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("b"))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	k := make([]byte, 8)
	v := make([]byte, 400)
	b.ResetTimer()
	for i := range b.N {
		binary.BigEndian.PutUint64(k, uint64(i))
		if err := bdb.Update(func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte("b")).Put(k, v)
		}); err != nil {
			b.Fatal(err)
		}
	}
}
