package postgres_test

import (
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// TestTraffic: each runner's figures replace its earlier ones, the live
// runners' are summed per host, and a runner whose lease expired counts
// no more.
func TestTraffic(t *testing.T) {
	db, _, _ := newStore(t, nil)
	now := time.Now()
	for _, id := range []string{"r1", "r2"} {
		if err := db.Register(ctx, store.RunnerInfo{ID: id, Workers: 4}, now, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Register(ctx, store.RunnerInfo{ID: "gone", Workers: 4}, now.Add(-2*time.Minute), time.Minute); err != nil {
		t.Fatal(err)
	}
	pub := func(id string, hs ...store.HostTraffic) {
		t.Helper()
		if err := db.PublishTraffic(ctx, id, now, hs); err != nil {
			t.Fatalf("PublishTraffic %s: %v", id, err)
		}
	}
	pub("r1", store.HostTraffic{Host: "a.example", InFlight: 2, SendRate: 10, TooMany: 3, Breaker: store.BreakerClosed},
		store.HostTraffic{Host: "old.example", InFlight: 1, Breaker: store.BreakerClosed})
	pub("r1", store.HostTraffic{Host: "a.example", InFlight: 3, SendRate: 12, TooMany: 4, Timeouts: 1, Breaker: store.BreakerClosed})
	pub("r2", store.HostTraffic{Host: "a.example", InFlight: 1, SendRate: 8, ServerErrors: 2, Breaker: store.BreakerHalfOpen, Throttled: true, Rate: 20})
	pub("gone", store.HostTraffic{Host: "a.example", InFlight: 50, SendRate: 500, Breaker: store.BreakerOpen},
		store.HostTraffic{Host: "dead.example", InFlight: 5, Breaker: store.BreakerOpen})
	got, err := db.Traffic(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	want := store.HostTraffic{Host: "a.example", Runners: 2, InFlight: 4, SendRate: 20, TooMany: 4, ServerErrors: 2, Timeouts: 1,
		Breaker: store.BreakerHalfOpen, Throttled: true, Rate: 20}
	if len(got) != 1 || got[0] != want {
		t.Errorf("Traffic = %+v\nwant [%+v]: the live runners' latest figures, summed", got, want)
	}
	if err := db.Deregister(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Traffic(ctx, now); err != nil || len(got) != 1 || got[0].Runners != 1 || got[0].InFlight != 3 {
		t.Errorf("Traffic after r2 deregistered = %+v, %v; want r1's alone", got, err)
	}
	if err := db.PublishTraffic(ctx, "never-registered", now, []store.HostTraffic{{Host: "x.example", Breaker: store.BreakerClosed}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Traffic(ctx, now); len(got) != 1 {
		t.Errorf("a runner without a lease published %+v", got)
	}
}
