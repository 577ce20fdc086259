package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

var _ store.TrafficBoard = (*DB)(nil)

// The statements of the host_traffic table (migration 3). {schema} is
// filled in by trafficSQL.
const (
	trafficUpsert = `INSERT INTO {schema}.host_traffic
		(runner, host, in_flight, send_rate, recent_429, recent_5xx, timeouts, breaker, throttled, rate, updated_ns)
		SELECT $1::text, v.*, $11::bigint FROM unnest($2::text[], $3::int[], $4::float8[], $5::bigint[], $6::bigint[], $7::bigint[],
			$8::text[], $9::bool[], $10::float8[]) AS v
		WHERE EXISTS (SELECT 1 FROM {schema}.runners WHERE id = $1::text)
		ON CONFLICT (runner, host) DO UPDATE SET in_flight = excluded.in_flight, send_rate = excluded.send_rate,
			recent_429 = excluded.recent_429, recent_5xx = excluded.recent_5xx, timeouts = excluded.timeouts,
			breaker = excluded.breaker, throttled = excluded.throttled, rate = excluded.rate, updated_ns = excluded.updated_ns`
	trafficDropOthers = `DELETE FROM {schema}.host_traffic WHERE runner = $1 AND host <> ALL($2)`
	// The most shut breaker of the runners wins: open, then half_open.
	trafficSum = `SELECT t.host, count(*), sum(t.in_flight), sum(t.send_rate), sum(t.recent_429), sum(t.recent_5xx), sum(t.timeouts),
			CASE WHEN bool_or(t.breaker = 'open') THEN 'open' WHEN bool_or(t.breaker = 'half_open') THEN 'half_open' ELSE 'closed' END,
			bool_or(t.throttled), sum(t.rate)
		FROM {schema}.host_traffic t JOIN {schema}.runners r ON r.id = t.runner AND r.expires_ns > $1
		GROUP BY t.host ORDER BY t.host COLLATE "C"`
)

func (db *DB) trafficSQL(q string) string {
	return strings.ReplaceAll(q, "{schema}", pgx.Identifier{db.schema}.Sanitize())
}

// PublishTraffic replaces runner's rows of host_traffic with hs in one
// transaction (see store.TrafficBoard). A runner without a lease
// publishes nothing: its rows would outlive it.
func (db *DB) PublishTraffic(ctx context.Context, runner string, now time.Time, hs []store.HostTraffic) error {
	n := len(hs)
	hosts, inflight, rates := make([]string, n), make([]int32, n), make([]float64, n)
	n429, n5xx, timeouts := make([]int64, n), make([]int64, n), make([]int64, n)
	breakers, throttled, applied := make([]string, n), make([]bool, n), make([]float64, n)
	for i, h := range hs {
		hosts[i], inflight[i], rates[i] = h.Host, int32(h.InFlight), h.SendRate
		n429[i], n5xx[i], timeouts[i] = h.TooMany, h.ServerErrors, h.Timeouts
		breakers[i], throttled[i], applied[i] = h.Breaker, h.Throttled, h.Rate
	}
	err := db.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, db.trafficSQL(trafficDropOthers), runner, hosts); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, db.trafficSQL(trafficUpsert), runner, hosts, inflight, rates, n429, n5xx, timeouts, breakers, throttled, applied, nanos(now))
		return err
	})
	if err != nil {
		return db.wrap(fmt.Errorf("store: publish the host figures of runner %s in %s: %w", runner, db.where, err))
	}
	return nil
}

// Traffic sums the rows of the runners whose lease is live at now, per
// host (see store.TrafficBoard).
func (db *DB) Traffic(ctx context.Context, now time.Time) ([]store.HostTraffic, error) {
	if err := db.usable(ctx); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, db.trafficSQL(trafficSum), nanos(now))
	if err != nil {
		return nil, db.wrap(fmt.Errorf("store: host figures in %s: %w", db.where, err))
	}
	defer rows.Close()
	var out []store.HostTraffic
	for rows.Next() {
		var h store.HostTraffic
		if err := rows.Scan(&h.Host, &h.Runners, &h.InFlight, &h.SendRate, &h.TooMany, &h.ServerErrors, &h.Timeouts, &h.Breaker, &h.Throttled, &h.Rate); err != nil {
			return nil, db.wrap(err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap(fmt.Errorf("store: host figures in %s: %w", db.where, err))
	}
	return out, nil
}
