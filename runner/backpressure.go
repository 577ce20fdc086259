package runner

import "time"

// throttle is the send rate a host without a rate of its own is held to
// after it answered 429 or 503 with Retry-After: lowered by half of what
// it was taking at each such episode, raised while its answers are good
// (additive increase, multiplicative decrease), lifted after a quiet
// spell.
type throttle struct {
	rate      float64   // requests per second; 0 when not throttled
	hold      time.Time // no sends to the host before it
	decreased time.Time // the last decrease, so one episode lowers once
	last      time.Time // the last 429 or 503 with Retry-After
}

// throttleConfig bounds the throttle.
type throttleConfig struct {
	floor float64       // the lowest rate
	lift  time.Duration // quiet spell after which the throttle ends
}

// pushedBack records a 429 or 503 asking to wait ra; answered is the
// host's rate of good answers just before it.
func (t *throttle) pushedBack(now time.Time, ra time.Duration, answered float64, c throttleConfig) {
	t.last = now
	if h := now.Add(ra); h.After(t.hold) {
		t.hold = h
	}
	if now.Sub(t.decreased) < time.Second || now.Before(t.decreased.Add(ra)) {
		return // the same episode: the other answers in flight
	}
	base := answered
	if t.rate > 0 {
		base = min(base, t.rate)
	}
	if base <= 0 {
		base = max(t.rate, c.floor)
	}
	t.rate = max(base/2, c.floor)
	t.decreased = now
}

// answered raises a throttled rate by about max(1, rate/8) per second of
// good answers, and ends the throttle after the quiet spell. It reports
// whether the throttle ended.
func (t *throttle) answered(now time.Time, c throttleConfig) bool {
	if t.rate == 0 {
		return false
	}
	if now.Sub(t.last) >= c.lift {
		*t = throttle{}
		return true
	}
	t.rate += max(1, t.rate/8) / t.rate
	return false
}

// held reports whether sends to the host wait at now.
func (t *throttle) held(now time.Time) bool { return now.Before(t.hold) }
