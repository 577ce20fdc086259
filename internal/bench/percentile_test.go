package bench

import (
	"testing"
	"time"
)

// enqueue_p99_ms is the nearest-rank 99th percentile: of 100 latencies
// 1..100 ms it is 99 ms, not the maximum. (Before the fix the bench took
// lat[n*99/100], index 99 here: the maximum.)
func TestPercentileNearestRank(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, c := range []struct {
		p    int
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := percentile(lat, c.p); got != c.want {
			t.Errorf("p%d of 1..100 ms = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(lat[:1], 99); got != time.Millisecond {
		t.Errorf("p99 of one value = %v, want it", got)
	}
}
