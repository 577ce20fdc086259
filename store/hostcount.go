package store

import (
	"context"
	"time"
)

// HostCount is how many jobs wait for one host, by ClaimHost: pending
// jobs (an attempt to come) and unknown ones (a status query to come).
type HostCount struct {
	Host    string `json:"host"`
	Pending int64  `json:"pending"`
	Unknown int64  `json:"unknown"`
	// Due counts those of them due at the time asked (NextRunAt at or
	// before it).
	Due int64 `json:"due"`
}

// HostCounter is implemented by backends that count waiting jobs per
// host without decoding each job (Postgres keeps ClaimHost in a column).
type HostCounter interface {
	// HostCounts returns a count for every host with pending or unknown
	// jobs, ordered by host.
	HostCounts(ctx context.Context, now time.Time) ([]HostCount, error)
}
