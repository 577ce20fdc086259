package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// runnerInfo is what the runners table keeps of a store.RunnerInfo
// beside its id.
type runnerInfo struct {
	Workers int    `json:"workers"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
}

func decodeRunnerInfo(b []byte) (runnerInfo, error) {
	var ri runnerInfo
	err := json.Unmarshal(b, &ri)
	return ri, err
}

// Register starts the lease of a runner (see store.Work): a row of the
// runners table, shared by every handle on the database.
func (db *DB) Register(ctx context.Context, r store.RunnerInfo, now time.Time, ttl time.Duration) error {
	if r.ID == "" {
		return fmt.Errorf("store: a runner registers with an id")
	}
	if err := db.usable(ctx); err != nil {
		return err
	}
	info, err := json.Marshal(runnerInfo{Workers: r.Workers, Host: r.Host, PID: r.PID})
	if err != nil {
		return err
	}
	// One statement outside a transaction: a connection lost once it
	// was sent leaves it unknown (store.ErrCommitUnknown), as a COMMIT.
	tag, err := db.pool.Exec(ctx, db.q.register, r.ID, string(asciiJSON(info)), nanos(now), nanos(now.Add(ttl)))
	if err != nil {
		return db.wrap(classify(fmt.Errorf("store: register runner %s in %s: %w", r.ID, db.where, err), true))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: runner %s is already registered", r.ID)
	}
	return nil
}

// Heartbeat renews a live lease to now+ttl (see store.Work); an expired
// or missing one is store.ErrLeaseLost.
func (db *DB) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	if err := db.usable(ctx); err != nil {
		return err
	}
	tag, err := db.pool.Exec(ctx, db.q.heartbeat, id, nanos(now), nanos(now.Add(ttl)))
	if err != nil {
		return db.wrap(classify(fmt.Errorf("store: heartbeat of runner %s in %s: %w", id, db.where, err), true))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: runner %s", store.ErrLeaseLost, id)
	}
	return nil
}

// Deregister ends a runner's lease (see store.Work).
func (db *DB) Deregister(ctx context.Context, id string) error {
	if err := db.usable(ctx); err != nil {
		return err
	}
	if _, err := db.pool.Exec(ctx, db.q.deregister, id); err != nil {
		return db.wrap(classify(fmt.Errorf("store: deregister runner %s in %s: %w", id, db.where, err), true))
	}
	return nil
}

// Leases lists every runner registered on the database, oldest first,
// expired leases included until a Rescue removes them.
func (db *DB) Leases() ([]store.Lease, error) {
	if err := db.usable(bg); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(bg, db.q.leases)
	if err != nil {
		return nil, db.wrap(fmt.Errorf("store: leases in %s: %w", db.where, err))
	}
	defer rows.Close()
	out := []store.Lease{}
	for rows.Next() {
		var id string
		var info []byte
		var started, expires int64
		if err := rows.Scan(&id, &info, &started, &expires); err != nil {
			return nil, db.wrap(err)
		}
		ri, err := decodeRunnerInfo(info)
		if err != nil {
			return nil, fmt.Errorf("store: the lease of runner %s in %s does not decode: %w", id, db.where, err)
		}
		out = append(out, store.Lease{
			RunnerInfo: store.RunnerInfo{ID: id, Workers: ri.Workers, Host: ri.Host, PID: ri.PID},
			Started:    fromNanos(started), Expires: fromNanos(expires),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap(fmt.Errorf("store: leases in %s: %w", db.where, err))
	}
	return out, nil
}

// rescueBatch is the most jobs one transaction of Rescue moves.
const rescueBatch = 1000

// Rescue moves the running jobs whose owner holds no live lease at now to
// unknown (see store.Work). One rescuer at a time: each transaction takes
// an advisory lock of the schema first, drops the leases expired at now,
// then rewrites up to rescueBatch such jobs, each locked and read in it.
func (db *DB) Rescue(ctx context.Context, now time.Time, fn func(j *store.Job)) (int, error) {
	if err := db.usable(ctx); err != nil {
		return 0, err
	}
	total := 0
	// A record that does not decode is passed over (Check reports it):
	// it must not keep every other job running.
	skip := []string{}
	for {
		n, full := 0, false
		err := db.tx(ctx, func(tx pgx.Tx) error {
			n, full = 0, false
			if _, err := tx.Exec(ctx, db.q.advisoryXact, lockKey("rescue", db.schema)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, db.q.dropExpired, nanos(now)); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, db.q.rescuable, nanos(now), skip, rescueBatch)
			if err != nil {
				return err
			}
			b := &pgx.Batch{}
			got := 0
			for rows.Next() {
				got++
				var id string
				var rec []byte
				if err := rows.Scan(&id, &rec); err != nil {
					rows.Close()
					return err
				}
				old, err := decodeJob(rec)
				if err != nil || old.ID != id {
					skip = append(skip, id)
					continue
				}
				j := store.Rescued(old, now)
				if fn != nil {
					fn(j)
				}
				c, err := colsOf(j)
				if err != nil {
					rows.Close()
					return err
				}
				b.Queue(db.q.update, c.updateArgs()...)
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			full = got == rescueBatch
			if b.Len() == 0 {
				return nil
			}
			return tx.SendBatch(ctx, b).Close()
		})
		if err != nil {
			return total, err
		}
		total += n
		if !full {
			return total, nil
		}
	}
}
