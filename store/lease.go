package store

import "time"

// RunnerInfo describes a runner instance when it registers its lease.
type RunnerInfo struct {
	// ID names the instance; it is recorded as the owner of every job the
	// runner claims. A new id for every start (NewID).
	ID string
	// Workers is how many jobs the runner works at once. A backend may
	// size its commit batches or connection pool by it.
	Workers int
	// Host and PID say where the runner runs, for people reading leases.
	Host string
	PID  int
}

// Lease is a registered runner and how long its lease lasts.
type Lease struct {
	RunnerInfo
	// Started is when the runner registered.
	Started time.Time
	// Expires is when the lease ends unless it is renewed (Heartbeat).
	Expires time.Time
}

// Alive reports whether the lease has not expired at now.
func (l Lease) Alive(now time.Time) bool { return now.Before(l.Expires) }

// LeaseOf returns the lease of owner among leases, and whether there is
// one.
func LeaseOf(leases []Lease, owner string) (Lease, bool) {
	for _, l := range leases {
		if l.ID == owner {
			return l, true
		}
	}
	return Lease{}, false
}
