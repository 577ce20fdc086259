package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// MatchIDs returns the ids of up to max jobs f matches, from one
// snapshot. With a host filter each row's record is read too, for its
// request URL's host.
func (db *DB) MatchIDs(f store.ListFilter, max int) ([]string, bool, error) {
	if len(f.States) == 0 {
		return nil, false, fmt.Errorf("store: matching jobs needs a state filter")
	}
	states := make([]string, len(f.States))
	for i, s := range f.States {
		if _, ok := stateByte[s]; !ok {
			return nil, false, fmt.Errorf("store: unknown state %q", s)
		}
		states[i] = string(s)
	}
	where, args, ok := db.filterSQL(f)
	if !ok {
		return nil, false, nil
	}
	args = append(args, states)
	rec := "NULL::bytea"
	if f.Host != "" {
		rec = "job"
	}
	sql := fmt.Sprintf(`SELECT id::text, %s FROM %s WHERE state = ANY($%d) AND %s`, rec, db.table(), len(args), where)
	var ids []string
	more := false
	err := db.snapshot(bg, func(tx pgx.Tx) error {
		ids, more = nil, false
		rows, err := tx.Query(bg, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var rec []byte
			if err := rows.Scan(&id, &rec); err != nil {
				return err
			}
			if f.Host != "" {
				j, err := decodeJob(rec)
				if err != nil || store.HostOf(j.Request.URL) != f.Host {
					continue
				}
			}
			if len(ids) == max {
				more = true
				return nil
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false, db.wrap(fmt.Errorf("store: match jobs in %s: %w", db.where, err))
	}
	return ids, more, nil
}

// ManualMany applies the manual action fn to each job of ids in one
// transaction: the jobs are locked in id order, changed in Go with the
// checks of a single action, and written in one statement.
func (db *DB) ManualMany(ctx context.Context, ids []string, fn store.TransitionFunc) ([]error, error) {
	if len(ids) > store.MaxBulkBatch {
		return nil, fmt.Errorf("store: %d jobs in one manual batch; at most %d", len(ids), store.MaxBulkBatch)
	}
	if err := db.usable(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(ids))
	at := map[string][]int{} // a job id as the database spells it → its places in ids
	var sids []string
	for i, id := range ids {
		sid, err := jobID(id)
		if err != nil {
			errs[i] = err
			continue
		}
		if at[sid] == nil {
			sids = append(sids, sid)
		}
		at[sid] = append(at[sid], i)
	}
	slices.Sort(sids)
	held := false
	err := db.tx(ctx, func(tx pgx.Tx) error {
		held = false
		for _, sid := range sids {
			for _, i := range at[sid] {
				errs[i] = fmt.Errorf("%w: %s", store.ErrNotFound, sid)
			}
		}
		rows, err := tx.Query(ctx, `SELECT id::text, job FROM `+db.table()+` WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, sids)
		if err != nil {
			return err
		}
		var m manyCols
		pending := false
		for rows.Next() {
			var id string
			var rec []byte
			if err := rows.Scan(&id, &rec); err != nil {
				rows.Close()
				return err
			}
			old, err := decodeJob(rec)
			if err != nil {
				rows.Close()
				return fmt.Errorf("store: job %s in %s: %w", id, db.where, err)
			}
			places := at[id]
			j, err := changed(old, fn)
			for k, i := range places {
				errs[i] = err
				if k > 0 && err == nil {
					// The same job named twice changes once.
					errs[i] = &store.TransitionError{JobID: id, From: j.State, To: j.State, Why: "named twice in one batch"}
				}
			}
			if err != nil {
				continue
			}
			c, err := colsOf(j)
			if err != nil {
				rows.Close()
				return err
			}
			m.add(c)
			pending = pending || (j.State == store.StatePending && old.State != store.StatePending)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(m.id) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, db.q.updateMany, m.args()...); err != nil {
			return err
		}
		if pending {
			held, err = db.notify.inTx(ctx, tx)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if held {
		db.notify.trail()
	}
	return errs, nil
}
