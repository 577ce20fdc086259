package runner

import (
	"time"

	"github.com/idemrun/idemrun/store"
)

// breakerState is where a host's circuit breaker is.
type breakerState int

const (
	// breakerClosed: attempts go as the other limits allow.
	breakerClosed breakerState = iota
	// breakerOpen: no attempt goes until the cool-down ends.
	breakerOpen
	// breakerHalfOpen: one probe goes; its answer closes or reopens.
	breakerHalfOpen
)

func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return store.BreakerOpen
	case breakerHalfOpen:
		return store.BreakerHalfOpen
	}
	return store.BreakerClosed
}

// breaker opens after a run of failed sends to a host (timeouts, refused
// or broken connections), so its jobs stop holding workers; it lets one
// probe through after a cool-down that doubles with each failed probe.
type breaker struct {
	state    breakerState
	fails    int // failed sends in a row
	cooldown time.Duration
	until    time.Time // end of the open state's cool-down
}

// breakerConfig is when a breaker opens and for how long.
type breakerConfig struct {
	failures      int
	cooldown, cap time.Duration
}

// failed records a failed send and returns whether the state changed.
func (b *breaker) failed(now time.Time, c breakerConfig) bool {
	b.fails++
	switch {
	case b.state == breakerHalfOpen:
		b.cooldown = min(2*b.cooldown, c.cap)
	case b.state == breakerClosed && b.fails >= c.failures:
		b.cooldown = c.cooldown
	default:
		return false
	}
	b.state, b.until = breakerOpen, now.Add(b.cooldown)
	return true
}

// succeeded records an answered send and returns whether the state
// changed.
func (b *breaker) succeeded() bool {
	b.fails = 0
	if b.state == breakerClosed {
		return false
	}
	b.state, b.cooldown = breakerClosed, 0
	return true
}

// tick moves an open breaker whose cool-down is over to half-open and
// returns whether it did.
func (b *breaker) tick(now time.Time) bool {
	if b.state == breakerOpen && !now.Before(b.until) {
		b.state = breakerHalfOpen
		return true
	}
	return false
}
