package bolt

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// TestDamagedRecordDoesNotBlockRecovery: one undecodable running record
// stops Rescue for every other running job (so `idemrun run`
// exits with "runner: recovery: ..."), although claims pass over damaged
// records and `idemrun check` is the documented way to find them.
func TestDamagedRecordDoesNotBlockRecovery(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids []string
	for _, k := range []string{"a", "b"} {
		j := &store.Job{ID: store.NewID(), Key: k, Fingerprint: "fp", State: store.StatePending, CreatedAt: now, UpdatedAt: now, NextRunAt: now, Deadline: now.Add(time.Hour)}
		if _, err := db.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 2}); err != nil || len(cs) != 2 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	db.Close()
	damageRecord(t, path, ids[0])
	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.Rescue(ctx, now.Add(time.Minute), nil); err != nil {
		t.Errorf("Rescue with one damaged record = %d, %v; want the sound job recovered", n, err)
	}
	if j, _ := db.Get(ids[1]); j == nil || j.State != store.StateUnknown {
		t.Errorf("sound running job %s not recovered", ids[1])
	}
}

// A damaged end-state record does not stop the sweep of the others.
func TestDamagedRecordDoesNotBlockSweep(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var jobs []*store.Job
	for _, k := range []string{"a", "b", "c"} {
		jobs = append(jobs, &store.Job{ID: store.NewID(), Key: k, Fingerprint: "fp", State: store.StateSucceeded, Attempts: 1,
			CreatedAt: old, UpdatedAt: old, NextRunAt: old, Deadline: old.Add(time.Hour)})
	}
	if err := db.Seed(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	db.Close()
	damageRecord(t, path, jobs[0].ID)
	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, _, err := db.Sweep(ctx, old.Add(time.Hour), old.Add(time.Hour), 100)
	if err != nil || n != 2 {
		t.Errorf("Sweep with one damaged record = %d, %v; want the 2 sound jobs swept", n, err)
	}
	for _, j := range jobs[1:] {
		if _, err := db.Get(j.ID); err == nil {
			t.Errorf("sound job %s not swept", j.Key)
		}
	}
}

// damageRecord breaks the body's format byte of job id's record in the
// closed store at path, keeping its head (state, index time), so the index
// still finds it and decoding fails.
func damageRecord(t *testing.T, path, id string) {
	t.Helper()
	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bbolt.Tx) error {
		a, _ := uuid.Parse(id)
		v := append([]byte(nil), tx.Bucket(bucketJobs).Get(a[:])...)
		v[headLen] = 0x7f
		return tx.Bucket(bucketJobs).Put(a[:], v)
	}); err != nil {
		t.Fatal(err)
	}
}
