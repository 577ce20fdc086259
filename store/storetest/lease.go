package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// testLeaseAlive: a lease is alive strictly before it expires.
func testLeaseAlive(t *testing.T, _ func(t *testing.T) Store) {
	now := T0()
	l := store.Lease{RunnerInfo: store.RunnerInfo{ID: "a"}, Started: now.Add(-time.Minute), Expires: now}
	for _, c := range []struct {
		at   time.Time
		want bool
	}{
		{now.Add(-time.Minute), true},
		{now.Add(-time.Nanosecond), true},
		{now, false},
		{now.Add(time.Nanosecond), false},
	} {
		if got := l.Alive(c.at); got != c.want {
			t.Errorf("Alive(expires %+v) = %v; want %v", c.at.Sub(now), got, c.want)
		}
	}
	b := store.Lease{RunnerInfo: store.RunnerInfo{ID: "b"}, Expires: now.Add(time.Hour)}
	if got, ok := store.LeaseOf([]store.Lease{l, b}, "b"); !ok || got.ID != "b" || !got.Expires.Equal(b.Expires) {
		t.Errorf("LeaseOf(b) = %+v, %v; want b's lease", got, ok)
	}
	if got, ok := store.LeaseOf([]store.Lease{l, b}, "c"); ok || got.ID != "" {
		t.Errorf("LeaseOf(c) = %+v, %v; want none", got, ok)
	}
}

// leaseOf returns runner id's lease as Leases lists it.
func leaseOf(t *testing.T, s Store, id string) (store.Lease, bool) {
	t.Helper()
	ls, err := s.Leases()
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	return store.LeaseOf(ls, id)
}

// wantLease fails unless Leases lists r as registered at started and
// expiring at expires.
func wantLease(t *testing.T, s Store, r store.RunnerInfo, started, expires time.Time) {
	t.Helper()
	l, ok := leaseOf(t, s, r.ID)
	if !ok {
		t.Errorf("Leases lacks runner %s; want it listed", r.ID)
		return
	}
	if l.RunnerInfo != r || !l.Started.Equal(started) || !l.Expires.Equal(expires) {
		t.Errorf("lease of %s = %+v, started %v, expires %v; want %+v, %v, %v", r.ID, l.RunnerInfo, l.Started, l.Expires, r, started, expires)
	}
}

func wantNoLease(t *testing.T, s Store, id, why string) {
	t.Helper()
	if l, ok := leaseOf(t, s, id); ok {
		t.Errorf("Leases lists %s (%+v) %s; want it gone", id, l, why)
	}
}

func wantLeaseLost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("%s: err = %v; want errors.Is ErrLeaseLost", what, err)
	}
}

// testLeases: Register starts a lease of ttl, a second Register of an id
// is refused, Heartbeat renews a live lease and refuses an expired or
// unknown one, Deregister ends a lease, and Leases lists the registered
// runners, expired ones included until a Rescue removes them.
func testLeases(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	const ttl = 10 * time.Second
	if ls, err := s.Leases(); err != nil || len(ls) != 0 {
		t.Fatalf("Leases of a new store = %+v, %v; want none", ls, err)
	}
	a := store.RunnerInfo{ID: store.NewID(), Workers: 4, Host: "host-a", PID: 101}
	b := store.RunnerInfo{ID: store.NewID(), Workers: 1, Host: "host-b", PID: 202}
	if err := s.Register(ctx, a, now, ttl); err != nil {
		t.Fatalf("Register(a): %v", err)
	}
	if err := s.Register(ctx, b, now.Add(time.Second), time.Hour); err != nil {
		t.Fatalf("Register(b): %v", err)
	}
	wantLease(t, s, a, now, now.Add(ttl))
	wantLease(t, s, b, now.Add(time.Second), now.Add(time.Second+time.Hour))
	if ls, _ := s.Leases(); len(ls) != 2 {
		t.Errorf("Leases = %+v; want a and b", ls)
	}

	// An id names one runner: a second Register of it is refused and
	// leaves the first lease as it was.
	dup := a
	dup.Workers, dup.Host, dup.PID = 9, "elsewhere", 999
	if err := s.Register(ctx, dup, now.Add(2*time.Second), time.Hour); err == nil {
		t.Errorf("second Register of runner %s = nil; want a refusal", a.ID)
	}
	wantLease(t, s, a, now, now.Add(ttl))

	// A live lease is renewed to now+ttl; its start stays.
	if err := s.Heartbeat(ctx, a.ID, now.Add(5*time.Second), ttl); err != nil {
		t.Fatalf("Heartbeat(a) before expiry: %v", err)
	}
	expires := now.Add(5*time.Second + ttl)
	wantLease(t, s, a, now, expires)
	wantLeaseLost(t, s.Heartbeat(ctx, store.NewID(), now, ttl), "Heartbeat of a runner never registered")

	// At its expiry the lease is lost (Lease.Alive); it is not renewed,
	// and stays listed as it was until a Rescue.
	wantLeaseLost(t, s.Heartbeat(ctx, a.ID, expires, ttl), "Heartbeat at the lease's expiry")
	wantLeaseLost(t, s.Heartbeat(ctx, a.ID, expires.Add(time.Second), ttl), "Heartbeat after the lease's expiry")
	wantLease(t, s, a, now, expires)

	if err := s.Deregister(ctx, b.ID); err != nil {
		t.Fatalf("Deregister(b): %v", err)
	}
	wantNoLease(t, s, b.ID, "after its Deregister")
	wantLeaseLost(t, s.Heartbeat(ctx, b.ID, now.Add(20*time.Second), time.Hour), "Heartbeat after Deregister")

	c := store.RunnerInfo{ID: store.NewID(), Workers: 8, Host: "host-c", PID: 303}
	if err := s.Register(ctx, c, now.Add(20*time.Second), time.Hour); err != nil {
		t.Fatalf("Register(c): %v", err)
	}
	at := now.Add(30 * time.Second)
	if n, err := s.Rescue(ctx, at, nil); err != nil || n != 0 {
		t.Errorf("Rescue with no running jobs = %d, %v; want 0, nil", n, err)
	}
	wantNoLease(t, s, a.ID, "expired, after a Rescue")
	wantLease(t, s, c, now.Add(20*time.Second), now.Add(20*time.Second+time.Hour))
	wantLeaseLost(t, s.Heartbeat(ctx, a.ID, at, ttl), "Heartbeat of a lease a Rescue removed")
	if err := s.Heartbeat(ctx, c.ID, at, time.Hour); err != nil {
		t.Errorf("Heartbeat(c), live: %v", err)
	}
	wantLease(t, s, c, now.Add(20*time.Second), at.Add(time.Hour))
}
