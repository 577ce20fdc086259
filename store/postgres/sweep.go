package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// tryLockXact takes an advisory lock until the transaction ends, if no
// other session holds it, and says whether it did.
const tryLockXact = `SELECT pg_try_advisory_xact_lock($1)`

// Sweep deletes up to limit ended jobs (succeeded, failed, canceled) last
// updated before jobCutoff, in one transaction. The key of a deleted job
// updated at or after keyCutoff stays reserved (a row of key_tombs) until
// a later sweep's keyCutoff passes its last update; up to limit such
// reservations are released first. Both walks go through indexes, and
// rows other transactions hold are passed over for the next sweep.
//
// One sweeper at a time: the transaction first tries an advisory lock of
// the schema, and a sweep that does not get it (another node sweeps now)
// deletes nothing and returns 0, 0, nil. Retention on every node then
// costs one sweep's work, not one per node, and sweeps never contend for
// the same rows.
func (db *DB) Sweep(ctx context.Context, jobCutoff, keyCutoff time.Time, limit int) (jobs, keys int, err error) {
	if err := db.usable(ctx); err != nil {
		return 0, 0, err
	}
	if limit <= 0 {
		return 0, 0, nil
	}
	err = db.tx(ctx, func(tx pgx.Tx) error {
		jobs, keys = 0, 0
		var mine bool
		if err := tx.QueryRow(ctx, tryLockXact, lockKey("sweep", db.schema)).Scan(&mine); err != nil || !mine {
			return err
		}
		tag, err := tx.Exec(ctx, db.q.releaseTombs, nanos(keyCutoff), limit)
		if err != nil {
			return err
		}
		keys = int(tag.RowsAffected())
		var tk, tid []string
		var tupd []int64
		kc := nanos(keyCutoff)
		for _, s := range []store.State{store.StateSucceeded, store.StateFailed, store.StateCanceled} {
			if jobs == limit {
				break
			}
			rows, err := tx.Query(ctx, db.q.sweep, string(s), nanos(jobCutoff), limit-jobs)
			if err != nil {
				return err
			}
			for rows.Next() {
				var key, id string
				var upd int64
				if err := rows.Scan(&key, &id, &upd); err != nil {
					rows.Close()
					return err
				}
				jobs++
				if upd >= kc {
					tk, tid, tupd = append(tk, key), append(tid, id), append(tupd, upd)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		if len(tk) > 0 {
			if _, err := tx.Exec(ctx, db.q.insertTombs, tk, tid, tupd); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return jobs, keys, nil
}
