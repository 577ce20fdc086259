package bolt_test

import (
	"slices"
	"testing"

	"github.com/idemrun/idemrun/store/storetest"
)

// A page of a host filter passes over at most store.ListScan jobs of
// other hosts, then ends with a Next.
func TestListScanBound(t *testing.T) {
	db, _ := newDB(t, nil)
	if pages := storetest.ListScanBound(t, db); !slices.Equal(pages, []int{2, 2}) {
		t.Errorf("pages = %v; want 2 for each walk (the first ending at the scan bound)", pages)
	}
}
