package store

import (
	"context"
	"time"
)

// TrafficWindow is how far back a runner's recent figures of a host
// (HostTraffic) reach.
const TrafficWindow = 10 * time.Second

// HostTraffic is what runners saw of one host lately: one runner's
// figures as it publishes them, or the sum over live runners.
type HostTraffic struct {
	Host string `json:"host"`
	// Runners is how many live runners the figures are summed over.
	Runners int `json:"runners"`
	// InFlight is the attempts and status queries to the host in flight.
	InFlight int `json:"in_flight"`
	// SendRate is the attempts and status queries sent per second, over
	// the last TrafficWindow.
	SendRate float64 `json:"send_rate"`
	// TooMany, ServerErrors and Timeouts count, over the last
	// TrafficWindow, the answers 429, the answers 5xx, and the sends that
	// timed out or whose connection failed.
	TooMany      int64 `json:"recent_429"`
	ServerErrors int64 `json:"recent_5xx"`
	Timeouts     int64 `json:"recent_timeouts"`
	// Breaker is the host's circuit breaker: closed, half_open or open;
	// summed over runners, the most shut of theirs.
	Breaker string `json:"breaker"`
	// Throttled is set while a runner holds the host to a lower rate
	// after it pushed back (429, 503 with Retry-After).
	Throttled bool `json:"throttled,omitempty"`
	// Rate is the send rate the runners apply now (their policy's share,
	// or their throttle), summed; 0 when none applies.
	Rate float64 `json:"rate,omitempty"`
}

// TrafficBoard is implemented by backends that several runners share
// (Postgres): each runner publishes its figures there, so a command on
// any node sees the cluster's.
type TrafficBoard interface {
	// PublishTraffic replaces runner's figures with hs, taken at now.
	PublishTraffic(ctx context.Context, runner string, now time.Time, hs []HostTraffic) error
	// Traffic returns, per host, the figures of the runners whose lease
	// is live at now, summed (see HostTraffic), ordered by host.
	Traffic(ctx context.Context, now time.Time) ([]HostTraffic, error)
}

// Breaker states of HostTraffic, from open to shut.
const (
	BreakerClosed   = "closed"
	BreakerHalfOpen = "half_open"
	BreakerOpen     = "open"
)
