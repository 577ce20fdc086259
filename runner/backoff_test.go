package runner

import (
	"math"
	"testing"
	"time"
)

func TestBackoffCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		b       Backoff
		attempt int
		want    time.Duration
	}{
		{"defaults attempt 1", Backoff{}, 1, 250 * time.Millisecond},
		{"defaults attempt 2", Backoff{}, 2, 500 * time.Millisecond},
		{"defaults attempt 3", Backoff{}, 3, time.Second},
		{"defaults attempt 7", Backoff{}, 7, 16 * time.Second},
		{"defaults attempt 8 capped", Backoff{}, 8, 30 * time.Second},
		{"defaults attempt 0 is 1", Backoff{}, 0, 250 * time.Millisecond},
		{"defaults negative attempt is 1", Backoff{}, -7, 250 * time.Millisecond},
		{"defaults min int attempt is 1", Backoff{}, math.MinInt, 250 * time.Millisecond},
		{"defaults huge attempt", Backoff{}, math.MaxInt, 30 * time.Second},
		{"negative base and cap mean defaults", Backoff{Base: -1, Cap: -1}, 2, 500 * time.Millisecond},
		{"custom", Backoff{Base: time.Second, Cap: time.Minute}, 4, 8 * time.Second},
		{"custom capped", Backoff{Base: time.Second, Cap: time.Minute}, 7, time.Minute},
		{"base above cap", Backoff{Base: time.Hour, Cap: time.Minute}, 1, time.Minute},
		{"base equals cap", Backoff{Base: time.Minute, Cap: time.Minute}, 1, time.Minute},
		{"cap only", Backoff{Cap: time.Second}, 3, time.Second},
		{"max cap shift 62", Backoff{Base: 1, Cap: math.MaxInt64}, 63, 1 << 62},
		{"max cap shift 63", Backoff{Base: 1, Cap: math.MaxInt64}, 64, math.MaxInt64},
		{"max cap huge base", Backoff{Base: 1 << 40, Cap: math.MaxInt64}, 30, math.MaxInt64},
		{"max cap huge base exact", Backoff{Base: 1 << 40, Cap: math.MaxInt64}, 23, 1 << 62},
		{"max cap huge attempt", Backoff{Base: 3, Cap: math.MaxInt64}, math.MaxInt, math.MaxInt64},
		{"odd cap exact fit", Backoff{Base: 3, Cap: 12}, 3, 12},
		{"odd cap just over", Backoff{Base: 3, Cap: 11}, 3, 11},
	}
	for _, tt := range tests {
		got := tt.b.Ceiling(tt.attempt)
		if got != tt.want {
			t.Errorf("%s: Backoff%+v.Ceiling(%d) = %v, want %v", tt.name, tt.b, tt.attempt, got, tt.want)
		}
	}
}

// backoffTestConfigs covers the default, a small and an extreme setting.
func backoffTestConfigs() []Backoff {
	return []Backoff{
		{},
		{Base: time.Millisecond, Cap: 10 * time.Second},
		{Base: 1, Cap: math.MaxInt64},
		{Base: math.MaxInt64, Cap: math.MaxInt64},
		{Base: time.Hour, Cap: time.Second},
	}
}

func TestBackoffDelayAlwaysWithinCap(t *testing.T) {
	t.Parallel()
	const attempts = 1_000_000
	for _, b := range backoffTestConfigs() {
		_, limit := b.backoffLimits()
		r := NewRand(1)
		for n := 1; n <= attempts; n++ {
			c := b.Ceiling(n)
			d := b.Delay(n, r)
			if d < 0 || d > c || c > limit {
				t.Fatalf("Backoff%+v attempt %d: delay %v ceiling %v, want 0 ≤ delay ≤ ceiling ≤ cap %v", b, n, d, c, limit)
			}
		}
		for _, n := range []int{0, -1, math.MinInt, math.MaxInt - 1, math.MaxInt, 1 << 40} {
			for range 1000 {
				d := b.Delay(n, r)
				if d < 0 || d > limit {
					t.Fatalf("Backoff%+v attempt %d: delay %v, want in [0, %v]", b, n, d, limit)
				}
			}
		}
	}
}

func TestBackoffCeilingMonotone(t *testing.T) {
	t.Parallel()
	for _, b := range backoffTestConfigs() {
		prev := b.Ceiling(math.MinInt)
		for n := -2; n <= 200; n++ {
			c := b.Ceiling(n)
			if c < prev {
				t.Fatalf("Backoff%+v: Ceiling(%d) = %v < Ceiling(%d) = %v, want non-decreasing", b, n, c, n-1, prev)
			}
			prev = c
		}
		if got, want := b.Ceiling(math.MaxInt), prev; got != want {
			t.Errorf("Backoff%+v: Ceiling(MaxInt) = %v, want %v (the cap)", b, got, want)
		}
	}
}

func TestBackoffDelayAtMaxCeilingReachesHighValues(t *testing.T) {
	t.Parallel()
	// With ceiling = MaxInt64 the draw must still span the whole range.
	b := Backoff{Base: math.MaxInt64, Cap: math.MaxInt64}
	r := NewRand(7)
	var highest time.Duration
	for range 1000 {
		highest = max(highest, b.Delay(1, r))
	}
	if highest < math.MaxInt64/2 {
		t.Errorf("highest of 1000 draws = %v, want above MaxInt64/2", highest)
	}
}

func TestNewRandSameSeedSameSequence(t *testing.T) {
	t.Parallel()
	a, b := NewRand(42), NewRand(42)
	var bo Backoff
	for i := range 100 {
		got, want := bo.Delay(i+1, a), bo.Delay(i+1, b)
		if got != want {
			t.Fatalf("draw %d: seed 42 gave %v then %v, want the same", i, got, want)
		}
	}
}

func TestNewRandDifferentSeedsDiffer(t *testing.T) {
	t.Parallel()
	backoffAssertDiffer(t, "NewRand(1) vs NewRand(2)", NewRand(1).Uint64, NewRand(2).Uint64)
	backoffAssertDiffer(t, "NewSeededRand twice", NewSeededRand().Uint64, NewSeededRand().Uint64)
}

// backoffAssertDiffer fails if two sources yield the same 16 values.
func backoffAssertDiffer(t *testing.T, name string, a, b func() uint64) {
	t.Helper()
	same := 0
	for range 16 {
		if a() == b() {
			same++
		}
	}
	if same == 16 {
		t.Errorf("%s: 16 of 16 draws equal, want different sequences", name)
	}
}

func TestBackoffDelayDistribution(t *testing.T) {
	t.Parallel()
	const draws = 200_000
	b := Backoff{}
	attempt := 5 // ceiling 4s
	c := b.Ceiling(attempt)
	r := NewRand(2024)
	var sum float64
	lowest, highest := c, time.Duration(0)
	buckets := make([]int, 10)
	for range draws {
		d := b.Delay(attempt, r)
		sum += float64(d)
		lowest, highest = min(lowest, d), max(highest, d)
		buckets[min(int(float64(d)/float64(c)*10), 9)]++
	}
	mean := sum / draws
	if got, want := mean/float64(c), 0.5; math.Abs(got-want) > 0.01 {
		t.Errorf("mean/ceiling = %.4f, want %.2f ± 0.01", got, want)
	}
	if lowest > c/100 || highest < c-c/100 {
		t.Errorf("draws spanned [%v, %v], want close to [0, %v]", lowest, highest, c)
	}
	for i, n := range buckets {
		if got, want := float64(n)/draws, 0.1; math.Abs(got-want) > 0.01 {
			t.Errorf("decile %d holds %.4f of draws, want %.2f ± 0.01", i, got, want)
		}
	}
}

func BenchmarkBackoffDelay(b *testing.B) {
	bo := Backoff{}
	r := NewRand(1)
	var sink time.Duration
	n := 0
	for b.Loop() {
		n++
		sink += bo.Delay(n%40+1, r)
	}
	_ = sink
}
