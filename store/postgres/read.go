package postgres

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
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

// List returns a page of jobs (see store.ListFilter), newest first, or
// oldest first within each state. Cursors are those of store/bolt: a job
// id without a state filter, state | sort time | id with one. All of a
// page is read in one snapshot.
func (db *DB) List(f store.ListFilter) (store.ListPage, error) {
	if err := db.usable(bg); err != nil {
		return store.ListPage{}, err
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > store.MaxListLimit {
		return store.ListPage{}, fmt.Errorf("store: list limit %d over the maximum %d", f.Limit, store.MaxListLimit)
	}
	for _, s := range f.States {
		if _, ok := stateByte[s]; !ok {
			return store.ListPage{}, fmt.Errorf("store: unknown state %q", s)
		}
	}
	var cur []byte
	if f.Cursor != "" {
		if !CursorFits(f.Cursor, f.States) {
			return store.ListPage{}, fmt.Errorf("store: invalid list cursor %q; pass the next cursor of a previous page of the same list (same state filters)", f.Cursor)
		}
		cur, _ = hex.DecodeString(f.Cursor)
	}
	if f.Oldest && len(f.States) == 0 {
		return store.ListPage{}, fmt.Errorf("store: listing the oldest jobs needs a state filter, and a cursor from an oldest-first page of it")
	}
	var page store.ListPage
	err := db.snapshot(bg, func(tx pgx.Tx) error {
		var err error
		if len(f.States) == 0 {
			page, err = db.listAll(tx, f.Limit, cur)
		} else {
			page, err = db.listStates(tx, f, cur)
		}
		return err
	})
	return page, err
}

// listed is a row of a list query.
type listed struct {
	id    string
	state store.State
	sort  int64
	job   *store.Job
}

// listRows reads a list query's rows.
func listRows(tx pgx.Tx, sql string, args ...any) ([]listed, error) {
	rows, err := tx.Query(bg, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []listed
	for rows.Next() {
		var l listed
		var s string
		var rec []byte
		if err := rows.Scan(&l.id, &s, &l.sort, &rec); err != nil {
			return nil, err
		}
		l.state = store.State(s)
		if l.job, err = decodeJob(rec); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// listAll walks every job by id, newest first, after the id cur.
func (db *DB) listAll(tx pgx.Tx, limit int, cur []byte) (store.ListPage, error) {
	var rows []listed
	var err error
	if cur == nil {
		rows, err = listRows(tx, db.q.listAll, limit+1)
	} else {
		rows, err = listRows(tx, db.q.listAllAfter, limit+1, uuid.UUID(cur).String())
	}
	if err != nil {
		return store.ListPage{}, err
	}
	var page store.ListPage
	if len(rows) > limit {
		rows = rows[:limit]
		id := uuid.MustParse(rows[limit-1].id)
		page.Next = hex.EncodeToString(id[:])
	}
	for _, r := range rows {
		page.Jobs = append(page.Jobs, r.job)
	}
	return page, nil
}

// listStates walks each state of the filter in its order, starting in the
// cursor's state after the cursor. A full page has a Next only when
// another job follows it.
func (db *DB) listStates(tx pgx.Tx, f store.ListFilter, cur []byte) (store.ListPage, error) {
	var page store.ListPage
	started := cur == nil
	for si, s := range f.States {
		var rows []listed
		var err error
		need := f.Limit - len(page.Jobs)
		first, after := db.q.listNewest, db.q.listNewestAfter
		if f.Oldest {
			first, after = db.q.listOldest, db.q.listOldestAfter
		}
		if started {
			rows, err = listRows(tx, first, need+1, string(s))
		} else {
			if cur[0] != stateByte[s] {
				continue
			}
			started = true
			sortNS := int64(binary.BigEndian.Uint64(cur[1:9]) ^ 1<<63)
			rows, err = listRows(tx, after, need+1, string(s), sortNS, uuid.UUID(cur[9:]).String())
		}
		if err != nil {
			return store.ListPage{}, err
		}
		more := len(rows) > need
		if more {
			rows = rows[:need]
		}
		for _, r := range rows {
			page.Jobs = append(page.Jobs, r.job)
		}
		if len(page.Jobs) < f.Limit {
			continue
		}
		if !more && si+1 < len(f.States) {
			rest := make([]string, 0, len(f.States)-si-1)
			for _, s := range f.States[si+1:] {
				rest = append(rest, string(s))
			}
			if err := tx.QueryRow(bg, db.q.anyInStates, rest).Scan(&more); err != nil {
				return store.ListPage{}, err
			}
		}
		// The page filled up in this state (rows holds its last job):
		// it has a next one if a job follows, here or in a later state.
		if more {
			page.Next = cursorOf(rows[len(rows)-1])
		}
		return page, nil
	}
	return page, nil
}

// cursorOf is the list cursor after r: state | sort time | id, hex.
func cursorOf(r listed) string {
	k := make([]byte, 1+8+16)
	k[0] = stateByte[r.state]
	binary.BigEndian.PutUint64(k[1:9], uint64(r.sort)^1<<63)
	id := uuid.MustParse(r.id)
	copy(k[9:], id[:])
	return hex.EncodeToString(k)
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
