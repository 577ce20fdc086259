package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// TestSweepKeepsKeyReservations: a swept job's key stays reserved until the
// key retention passes, then is released; the file stays consistent.
func TestSweepKeepsKeyReservations(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if rep, err := db.Check(); err != nil || !rep.OK() {
			t.Errorf("check: %v %v", err, rep.Problems)
		}
		db.Close()
	})
	ctx := context.Background()
	t0 := storetest.T0()
	j := storetest.NewJob("pay-1", t0)
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Cancel(ctx, j.ID, t0, "test", "done"); err != nil {
		t.Fatal(err)
	}
	// Jobs older than t0+1h go; keys are kept until t0-1h has passed them.
	n, _, err := db.Sweep(ctx, t0.Add(time.Hour), t0.Add(-time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("sweep: n=%d err=%v, want 1 job deleted", n, err)
	}
	if _, err := db.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("swept job still readable: %v", err)
	}
	if _, err := db.GetByKey("pay-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey of a reserved key: %v, want ErrNotFound", err)
	}
	again := storetest.NewJob("pay-1", t0.Add(2*time.Hour))
	var kc *store.KeyConflictError
	if _, err := db.Enqueue(ctx, again); !errors.As(err, &kc) || kc.Deleted.IsZero() || kc.JobID != j.ID {
		t.Fatalf("re-enqueue of a reserved key: %v, want a KeyConflictError naming %s as deleted", err, j.ID)
	}
	if rep, err := db.Check(); err != nil || !rep.OK() {
		t.Fatalf("check with a tombstone: %v %v", err, rep.Problems)
	}
	// Once key retention passes, the key is free again.
	if _, _, err := db.Sweep(ctx, t0.Add(time.Hour), t0.Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Enqueue(ctx, again); err != nil || res.Existing {
		t.Fatalf("enqueue after the reservation ended: %+v %v", res, err)
	}
	st, _ := db.Stats()
	if st[store.StatePending] != 1 || st[store.StateCanceled] != 0 {
		t.Errorf("stats %v, want one pending job", st)
	}
}
