package api_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/api"
	bbolt "go.etcd.io/bbolt"
)

// TestSweepPassesOverDamagedRecords: one damaged end-state record among
// the expired jobs must not end Client.Sweep after its first batch (a batch
// of 999 read as "done"): every other expired job is swept in one call.
func TestSweepPassesOverDamagedRecords(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	path := filepath.Join(t.TempDir(), "s.db")
	c, err := api.Open(path, &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 2500
	_, ids := enqueueCanceled(t, c, n)
	first := ids[0]
	c.Close()
	// Damage the first canceled job's record (as store's damageRecord does).
	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bbolt.Tx) error {
		a, _ := uuid.Parse(first)
		v := append([]byte(nil), tx.Bucket([]byte("jobs")).Get(a[:])...)
		v[18] = 0x7f
		return tx.Bucket([]byte("jobs")).Put(a[:], v)
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	c, err = api.Open(path, &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now = t0.Add(8 * 24 * time.Hour)
	got, err := c.Sweep(ctx, 7*24*time.Hour, 30*24*time.Hour)
	if err != nil || got != n-1 {
		t.Errorf("Sweep with one damaged record among %d expired jobs = %d, %v; want %d", n, got, err, n-1)
	}
}
