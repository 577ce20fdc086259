package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// RawCommitsPerSecond measures the disk's ceiling for this store: bbolt
// Update transactions with one small Put each, committed back to back for
// d, in a scratch file at path (removed afterwards). Benchmarks report it
// next to their figures so they read as ratios on any machine.
func RawCommitsPerSecond(path string, d time.Duration) (float64, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer db.Close()
	key := make([]byte, 8)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		binary.BigEndian.PutUint64(key, uint64(n))
		if err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("raw"))
			if err != nil {
				return err
			}
			return b.Put(key, key)
		}); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// Seed stores jobs in end states (succeeded, failed, canceled) directly, in
// one transaction, with their keys, index entries and counters. It exists
// to pre-fill stores for scale benchmarks and tests; jobs that should be
// worked go through Enqueue.
func (db *DB) Seed(ctx context.Context, jobs []*store.Job) error {
	for _, j := range jobs {
		if !j.State.Terminal() {
			return fmt.Errorf("store: seed takes end-state jobs only, job %s is %s", j.ID, j.State)
		}
	}
	recs := make([][]byte, len(jobs))
	for i, j := range jobs {
		rec, err := encodeJob(j)
		if err != nil {
			return err
		}
		recs[i] = rec
	}
	return db.write(func(tx *bbolt.Tx) error {
		b := db.writeBuckets(tx)
		// The same rules as Enqueue: one job per key and per id, stored or
		// earlier in this call; nothing is written unless every job passes.
		keys := make(map[string]bool, len(jobs))
		ids := make(map[string]bool, len(jobs))
		for _, j := range jobs {
			if b.keys.Get([]byte(j.Key)) != nil || keys[j.Key] {
				return fmt.Errorf("store: seed: key %q already used", j.Key)
			}
			id, err := idBytes(j.ID)
			if err != nil {
				return err
			}
			if b.jobs.Get(id) != nil || ids[string(id)] {
				return fmt.Errorf("store: seed: job id %s already used", j.ID)
			}
			keys[j.Key], ids[string(id)] = true, true
		}
		for i, j := range jobs {
			if err := b.insert(j, recs[i], indexValue(j)); err != nil {
				return fatal(err)
			}
		}
		return nil
	})
}
