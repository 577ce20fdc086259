package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/storetest"
)

// TestListOldest: Oldest walks a state's index forwards, earliest
// next_run_at first, and refuses a missing state filter.
func TestListOldest(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "o.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	base := storetest.T0()
	var keys []string
	for i, off := range []int{30, 10, 20} {
		j := storetest.NewJob("k"+string(rune('a'+i)), base)
		j.NextRunAt = base.Add(time.Duration(off) * time.Minute)
		if _, err := db.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, j.Key)
	}
	page, err := db.List(store.ListFilter{States: []store.State{store.StatePending}, Limit: 2, Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range page.Jobs {
		got = append(got, j.Key)
	}
	if len(got) != 2 || got[0] != keys[1] || got[1] != keys[2] {
		t.Errorf("oldest pending = %v, want [%s %s]", got, keys[1], keys[2])
	}
	if _, err := db.List(store.ListFilter{Oldest: true}); err == nil {
		t.Errorf("Oldest without a state filter: no error")
	}
}
