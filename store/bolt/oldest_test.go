package bolt_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// TestListOldest: Oldest walks a state's index forwards, earliest
// next_run_at first, pages with a cursor, and refuses a missing state
// filter.
func TestListOldest(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "o.db"), nil)
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
	if page.Next == "" {
		t.Fatalf("a full oldest page with a job after it has no Next")
	}
	// The next page continues forwards after the cursor and is the last.
	page, err = db.List(store.ListFilter{States: []store.State{store.StatePending}, Limit: 2, Oldest: true, Cursor: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].Key != keys[0] || page.Next != "" {
		t.Errorf("second oldest page = %d jobs (next %q), want only %s and no Next", len(page.Jobs), page.Next, keys[0])
	}
	// A page that ends exactly at the last job has no Next.
	page, err = db.List(store.ListFilter{States: []store.State{store.StatePending}, Limit: 3, Oldest: true})
	if err != nil || len(page.Jobs) != 3 || page.Next != "" {
		t.Errorf("oldest page of exactly all 3 jobs: %d jobs, next %q, err %v; want 3, none, nil", len(page.Jobs), page.Next, err)
	}
	if _, err := db.List(store.ListFilter{Oldest: true}); err == nil {
		t.Errorf("Oldest without a state filter: no error")
	}
}
