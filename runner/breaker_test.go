package runner

import (
	"testing"
	"time"
)

// The breaker opens after a run of failures, lets one probe through after
// the cool-down, reopens for twice as long when the probe fails (up to
// the cap) and closes when one succeeds.
func TestBreaker(t *testing.T) {
	c := breakerConfig{failures: 3, cooldown: time.Second, cap: 3 * time.Second}
	now := time.Unix(1000, 0)
	var b breaker
	for i := range 2 {
		if b.failed(now, c) || b.state != breakerClosed {
			t.Fatalf("after %d failures: %s, want closed", i+1, b.state)
		}
	}
	if b.succeeded(); b.fails != 0 {
		t.Fatal("a success does not end the run of failures")
	}
	for range 3 {
		b.failed(now, c)
	}
	if b.state != breakerOpen || !b.until.Equal(now.Add(time.Second)) {
		t.Fatalf("after 3 failures: %s until %s, want open for 1s", b.state, b.until)
	}
	if b.tick(now.Add(999 * time.Millisecond)) {
		t.Fatal("half-open before the cool-down ended")
	}
	for _, want := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		now = b.until
		if !b.tick(now) || b.state != breakerHalfOpen {
			t.Fatalf("after the cool-down: %s, want half_open", b.state)
		}
		if !b.failed(now, c) || b.state != breakerOpen || b.cooldown != want {
			t.Fatalf("failed probe: %s for %s, want open for %s", b.state, b.cooldown, want)
		}
	}
	b.tick(b.until)
	if !b.succeeded() || b.state != breakerClosed || b.cooldown != 0 {
		t.Fatalf("successful probe: %s, want closed", b.state)
	}
}
