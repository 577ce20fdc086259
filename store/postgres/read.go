package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// The methods without a context (reads) run under this one: the store's
// contract gives them none.
var bg = context.Background()

// Get returns the job with this id, or store.ErrNotFound.
func (db *DB) Get(id string) (*store.Job, error) {
	if err := db.usable(bg); err != nil {
		return nil, err
	}
	sid, err := jobID(id)
	if err != nil {
		return nil, err
	}
	var rec []byte
	err = db.pool.QueryRow(bg, db.q.jobByID, sid).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, sid)
	}
	if err != nil {
		return nil, db.wrap(fmt.Errorf("store: get job %s from %s: %w", sid, db.where, err))
	}
	j, err := decodeJob(rec)
	if err != nil {
		return nil, fmt.Errorf("store: job %s in %s: %w", sid, db.where, err)
	}
	return j, nil
}

// GetByKey returns the job holding an idempotency key, or
// store.ErrNotFound (also while the key is reserved for a deleted job).
func (db *DB) GetByKey(key string) (*store.Job, error) {
	if err := db.usable(bg); err != nil {
		return nil, err
	}
	var rec []byte
	err := db.pool.QueryRow(bg, db.q.jobByKey, key).Scan(&rec)
	if err == nil {
		j, err := decodeJob(rec)
		if err != nil {
			return nil, fmt.Errorf("store: the job of key %q in %s: %w", key, db.where, err)
		}
		return j, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, db.wrap(fmt.Errorf("store: get the job of key %q from %s: %w", key, db.where, err))
	}
	var id string
	var upd int64
	switch err := db.pool.QueryRow(bg, db.q.tombByKey, key).Scan(&id, &upd); {
	case err == nil:
		return nil, fmt.Errorf("%w: the job that had key %q ended and was deleted by retention; the key stays reserved", store.ErrNotFound, key)
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, db.wrap(fmt.Errorf("store: get the job of key %q from %s: %w", key, db.where, err))
	}
	return nil, fmt.Errorf("%w: no job has key %q", store.ErrNotFound, key)
}

// Stats counts jobs by state (a count over the state index, exact at the
// moment of the query).
func (db *DB) Stats() (map[store.State]int64, error) {
	if err := db.usable(bg); err != nil {
		return nil, err
	}
	out := make(map[store.State]int64, len(stateByte))
	for _, s := range store.States() {
		out[s] = 0
	}
	rows, err := db.pool.Query(bg, db.q.stats)
	if err != nil {
		return nil, db.wrap(fmt.Errorf("store: stats of %s: %w", db.where, err))
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, db.wrap(err)
		}
		out[store.State(s)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, db.wrap(fmt.Errorf("store: stats of %s: %w", db.where, err))
	}
	return out, nil
}

// OldestDue returns the earliest NextRunAt among jobs of state s (pending
// or unknown), or the zero time when there are none.
func (db *DB) OldestDue(s store.State) (time.Time, error) {
	if err := db.usable(bg); err != nil {
		return time.Time{}, err
	}
	var n int64
	err := db.pool.QueryRow(bg, db.q.oldest, string(s)).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, db.wrap(fmt.Errorf("store: oldest %s job in %s: %w", s, db.where, err))
	}
	return fromNanos(n), nil
}

// CursorFits reports whether cursor can be the next cursor of a list with
// the state filter states: a job id for the unfiltered list, or an index
// position in one of the filtered states.
func CursorFits(cursor string, states []store.State) bool {
	c, err := hex.DecodeString(cursor)
	if err != nil {
		return false
	}
	if len(states) == 0 {
		return len(c) == 16
	}
	if len(c) != 25 {
		return false
	}
	for _, s := range states {
		if sb, ok := stateByte[s]; ok && sb == c[0] {
			return true
		}
	}
	return false
}
