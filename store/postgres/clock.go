package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultClockRefresh is how often a handle measures the database's clock
// again unless Options.ClockRefresh says otherwise.
const DefaultClockRefresh = 5 * time.Second

// clockSamples is how many round trips a measurement takes; the one of
// the shortest round trip is kept, its midpoint the least uncertain.
const clockSamples = 3

// clock is the database's time as this process best knows it: the
// server's clock_timestamp() read at the midpoint of a round trip, plus
// the local time elapsed since. Elapsed time is measured on the local
// clock's monotonic readings, so a step of this machine's wall clock
// changes nothing; only its drift between measurements does.
type clock struct {
	local func() time.Time
	at    atomic.Pointer[clockAnchor]
}

// clockAnchor pairs a local reading with the server's time at it.
type clockAnchor struct {
	local, server time.Time
}

func newClock(local func() time.Time) *clock {
	if local == nil {
		local = time.Now
	}
	return &clock{local: local}
}

// now returns the database's time by the last measurement, or the local
// time before any.
func (c *clock) now() time.Time {
	a := c.at.Load()
	if a == nil {
		return c.local()
	}
	return a.server.Add(c.local().Sub(a.local))
}

// measure reads the server's clock clockSamples times on one connection
// of pool, taken first so that waiting for one is not in a round trip,
// and keeps the reading of the shortest round trip.
func (c *clock) measure(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var best *clockAnchor
	var bestRTT time.Duration
	for range clockSamples {
		t0 := c.local()
		var server time.Time
		// The simple protocol: one round trip, no statement to prepare.
		if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`, pgx.QueryExecModeSimpleProtocol).Scan(&server); err != nil {
			return err
		}
		t1 := c.local()
		rtt := t1.Sub(t0)
		if best == nil || rtt < bestRTT {
			best, bestRTT = &clockAnchor{local: t0.Add(rtt / 2), server: server}, rtt
		}
	}
	c.at.Store(best)
	return nil
}

// Now returns the database's time as this handle best knows it (see
// store.Clock): measured at Open and every Options.ClockRefresh since,
// so nodes whose clocks disagree agree on when jobs are due and leases
// end. It is within about half a round trip of the server's clock, and
// may step by that much when measured again. Pass it as the now of the
// store's methods in place of time.Now.
func (db *DB) Now() time.Time { return db.clock.now() }

// refreshClock measures the clock every interval until the handle is
// closed. A failed measurement keeps the last one: the database is away,
// and the local clock's drift over an outage is small.
func (db *DB) refreshClock(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-db.life.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(db.life, 5*time.Second)
		_ = db.clock.measure(ctx, db.pool)
		cancel()
	}
}
