package api_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// TestSweepReleasesAllExpiredKeys: once key retention has passed for
// every swept job, one Client.Sweep (what `idemrun run` calls every minute)
// must release every reservation, not only the first 1000.
func TestSweepReleasesAllExpiredKeys(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	c, err := api.Open(filepath.Join(t.TempDir(), "s.db"), &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 1500
	items, _ := enqueueCanceled(t, c, n)
	// Day 8: the jobs go, their keys stay reserved for 30 days.
	now = t0.Add(8 * 24 * time.Hour)
	if got, err := c.Sweep(ctx, 7*24*time.Hour, 30*24*time.Hour); err != nil || got != n {
		t.Fatalf("Sweep on day 8 = %d, %v; want %d", got, err, n)
	}
	// Day 31: every reservation is over.
	now = t0.Add(31 * 24 * time.Hour)
	if _, err := c.Sweep(ctx, 7*24*time.Hour, 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	still := 0
	for i := range items {
		_, err := c.Enqueue(ctx, items[i].Request, items[i].Options)
		if errors.Is(err, store.ErrKeyConflict) {
			still++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if still > 0 {
		t.Errorf("after key retention passed for all %d swept jobs, Sweep left %d keys reserved", n, still)
	}
}

// enqueueCanceled enqueues n jobs (keys key-0000 …) in one EnqueueMany and
// cancels them all, so they are end-state jobs for a sweep, and returns the
// items and the jobs' ids.
func enqueueCanceled(t *testing.T, c *api.Client, n int) ([]api.ManyItem, []string) {
	t.Helper()
	ctx := context.Background()
	items := make([]api.ManyItem, n)
	for i := range items {
		items[i] = api.ManyItem{
			Request: api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte(fmt.Sprintf(`{"n":%d}`, i))},
			Options: api.EnqueueOptions{Key: fmt.Sprintf("key-%04d", i)},
		}
	}
	res, err := c.EnqueueMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, err := c.Cancel(ctx, r.Job.ID, "t", ""); err != nil {
			t.Fatal(err)
		}
		ids[i] = r.Job.ID
	}
	return items, ids
}
