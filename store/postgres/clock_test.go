package postgres_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store/postgres"
)

// clockBound is how far Now may be from the server's clock: half a round
// trip on loopback, with room for a loaded machine under -race.
const clockBound = 100 * time.Millisecond

// skewed is a local clock off by an adjustable skew.
func skewed(skew *atomic.Int64) func() time.Time {
	return func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
}

// nowAgrees reads the server's clock_timestamp() between two readings of
// db.Now and reports whether it falls between them, give or take
// clockBound.
func nowAgrees(t *testing.T, conn *pgx.Conn, db *postgres.DB) bool {
	t.Helper()
	before := db.Now()
	var server time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&server); err != nil {
		t.Fatal(err)
	}
	after := db.Now()
	ok := !server.Before(before.Add(-clockBound)) && !server.After(after.Add(clockBound))
	if !ok {
		t.Logf("db.Now %v .. %v, server %v", before, after, server)
	}
	return ok
}

// TestClockSkew: handles whose local clocks are an hour ahead and an hour
// behind both tell the server's time, and agree with each other.
func TestClockSkew(t *testing.T) {
	_, u, schema := newStore(t, nil)
	var ahead, behind atomic.Int64
	ahead.Store(int64(time.Hour))
	behind.Store(int64(-time.Hour))
	a := openStore(t, u, &postgres.Options{Schema: schema, LocalClock: skewed(&ahead)})
	b := openStore(t, u, &postgres.Options{Schema: schema, LocalClock: skewed(&behind)})
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for name, db := range map[string]*postgres.DB{"an hour ahead": a, "an hour behind": b} {
		if !nowAgrees(t, conn, db) {
			t.Errorf("the handle whose clock is %s: Now is not the server's time", name)
		}
	}
	if d := a.Now().Sub(b.Now()).Abs(); d > 2*clockBound {
		t.Errorf("the two handles' Now differ by %v; want them to agree", d)
	}
}

// TestClockRemeasured: when the local clock steps by an hour, the next
// measurement brings Now back to the server's time.
func TestClockRemeasured(t *testing.T) {
	_, u, schema := newStore(t, nil)
	var skew atomic.Int64
	db := openStore(t, u, &postgres.Options{Schema: schema, LocalClock: skewed(&skew), ClockRefresh: 20 * time.Millisecond})
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if !nowAgrees(t, conn, db) {
		t.Fatalf("Now is not the server's time before the step")
	}
	skew.Store(int64(time.Hour))
	deadline := time.Now().Add(5 * time.Second)
	for !nowAgrees(t, conn, db) {
		if time.Now().After(deadline) {
			t.Fatalf("Now still off the server's time 5 s after the local clock stepped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
