package postgres_test

import (
	"slices"
	"testing"

	"github.com/idemrun/idemrun/store/storetest"
)

// A host filter is a condition of the query: one page finds the job
// behind ListScan jobs of another host.
func TestListScanBound(t *testing.T) {
	db, _, _ := newStore(t, nil)
	if pages := storetest.ListScanBound(t, db); !slices.Equal(pages, []int{1, 1}) {
		t.Errorf("pages = %v; want 1 for each walk", pages)
	}
}
