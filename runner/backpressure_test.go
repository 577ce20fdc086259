package runner

import (
	"testing"
	"time"
)

// A push-back holds the host until its Retry-After and halves what the
// host was answering, once per episode; good answers raise the rate, and
// a quiet spell lifts the throttle.
func TestThrottle(t *testing.T) {
	c := throttleConfig{floor: 1, lift: time.Minute}
	now := time.Unix(1000, 0)
	var th throttle
	th.pushedBack(now, time.Second, 50, c)
	if th.rate != 25 || !th.held(now.Add(999*time.Millisecond)) || th.held(now.Add(time.Second)) {
		t.Fatalf("after a push-back: rate %v, hold %s; want 25/s held for 1s", th.rate, th.hold.Sub(now))
	}
	th.pushedBack(now.Add(10*time.Millisecond), time.Second, 50, c)
	if th.rate != 25 {
		t.Fatalf("a second answer of the same episode lowered the rate to %v", th.rate)
	}
	for range 25 {
		th.answered(now.Add(2*time.Second), c)
	}
	if th.rate < 28 || th.rate > 29 {
		t.Errorf("a second's worth of good answers at 25/s raised the rate to %v, want about 28", th.rate)
	}
	th.pushedBack(now.Add(3*time.Second), 2*time.Second, 40, c)
	if th.rate > 20.01 || !th.held(now.Add(4*time.Second)) {
		t.Errorf("a later push-back: rate %v, want at most half of 40", th.rate)
	}
	th.pushedBack(now.Add(10*time.Second), time.Second, 0, c)
	if th.rate < c.floor {
		t.Errorf("rate %v under the floor", th.rate)
	}
	if !th.answered(now.Add(2*time.Minute), c) || th.rate != 0 || th.held(now.Add(2*time.Minute)) {
		t.Errorf("after a quiet minute the throttle stays: %+v", th)
	}
}
