package postgres

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// List returns a page of jobs (see store.ListFilter), newest first, or
// oldest first within each state. Cursors are those of store/bolt: a job
// id without a state filter, state | sort time | id with one. The
// filters are conditions on the jobs' columns (the state index bounds the
// walk; the rest is checked on its rows), and store.ListFilter.Matches
// decides on each row read. All of a page is read in one snapshot.
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
	oldest, err := f.Walk()
	if err != nil {
		return store.ListPage{}, err
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
	l := &lister{f: f}
	where, args, ok := db.filterSQL(f)
	if !ok {
		return store.ListPage{}, nil
	}
	err = db.snapshot(bg, func(tx pgx.Tx) error {
		l.page = store.ListPage{}
		if len(f.States) == 0 {
			var pos *listed
			if cur != nil {
				pos = &listed{id: uuid.UUID(cur).String()}
			}
			_, err := l.fill(tx, pos, func(pos *listed, n int) (string, []any) {
				a := append(append([]any(nil), args...), n)
				sql := `SELECT id::text, state, sort_ns, job FROM ` + db.table() + ` WHERE ` + where
				if pos != nil {
					a = append(a, pos.id)
					sql += ` AND id < $` + strconv.Itoa(len(a)) + `::uuid`
				}
				return sql + ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args)+1), a
			})
			return err
		}
		started := cur == nil
		for _, s := range f.States {
			var pos *listed
			if !started {
				if cur[0] != stateByte[s] {
					continue
				}
				started = true
				pos = &listed{id: uuid.UUID(cur[9:]).String(), state: s, sort: int64(binary.BigEndian.Uint64(cur[1:9]) ^ 1<<63)}
			}
			done, err := l.fill(tx, pos, func(pos *listed, n int) (string, []any) {
				a := append(append([]any(nil), args...), n, string(s))
				sql := `SELECT id::text, state, sort_ns, job FROM ` + db.table() + ` WHERE state = $` + strconv.Itoa(len(a)) + ` AND ` + where
				cmp, order := "<", "DESC"
				if oldest {
					cmp, order = ">", "ASC"
				}
				if s != store.StatePending && s != store.StateUnknown {
					// Ordered by update time: the bounds are a range of the index.
					if !f.Since.IsZero() {
						a = append(a, nanos(f.Since))
						sql += fmt.Sprintf(` AND sort_ns >= $%d`, len(a))
					}
					if !f.Until.IsZero() {
						a = append(a, nanos(f.Until))
						sql += fmt.Sprintf(` AND sort_ns < $%d`, len(a))
					}
				}
				if pos != nil {
					a = append(a, pos.sort, pos.id)
					sql += fmt.Sprintf(` AND (sort_ns, id) %s ($%d, $%d::uuid)`, cmp, len(a)-1, len(a))
				}
				return sql + fmt.Sprintf(` ORDER BY sort_ns %s, id %s LIMIT $%d`, order, order, len(args)+1), a
			})
			if done || err != nil {
				return err
			}
		}
		return nil
	})
	return l.page, err
}

// table is the jobs table, qualified.
func (db *DB) table() string { return pgx.Identifier{db.schema}.Sanitize() + ".jobs" }

// filterSQL is the condition of f's filters beyond its states, with its
// arguments ($1 on). The host column is the claim host, which for an
// unknown job may be its status URL's: those rows are kept for Matches
// to decide. ok is false when no job can match (an IDPrefix no id has).
func (db *DB) filterSQL(f store.ListFilter) (where string, args []any, ok bool) {
	conds := []string{"true"}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Host != "" {
		conds = append(conds, "(host = "+arg(f.Host)+" OR state = 'unknown')")
	}
	if !f.Since.IsZero() {
		conds = append(conds, "updated_ns >= "+arg(nanos(f.Since)))
	}
	if !f.Until.IsZero() {
		conds = append(conds, "updated_ns < "+arg(nanos(f.Until)))
	}
	if f.KeyPrefix != "" {
		conds = append(conds, "starts_with(key, "+arg(f.KeyPrefix)+")")
	}
	if f.IDPrefix != "" {
		lo, hi, ok := store.IDRange(f.IDPrefix)
		if !ok {
			return "", nil, false
		}
		conds = append(conds, "id BETWEEN "+arg(lo)+"::uuid AND "+arg(hi)+"::uuid")
	}
	return strings.Join(conds, " AND "), args, true
}

// listed is a row of a list query.
type listed struct {
	id    string
	state store.State
	sort  int64
	job   *store.Job
}

// lister collects a page from list queries.
type lister struct {
	f       store.ListFilter
	page    store.ListPage
	last    listed // the page's last job
	skipped int
}

// fill reads one walk (every job, or one state) from after pos, in
// batches of the rows the page still needs and one more, until the walk
// ends or the page is over: another job matched after a full page (Next
// is then after the page's last job), or ListScan rows failed Matches
// (Next is then after the last of them).
func (l *lister) fill(tx pgx.Tx, pos *listed, query func(pos *listed, n int) (string, []any)) (bool, error) {
	for {
		n := l.f.Limit - len(l.page.Jobs) + 1
		sql, args := query(pos, n)
		rows, err := listRows(tx, sql, args...)
		if err != nil {
			return true, err
		}
		for i := range rows {
			r := rows[i]
			pos = &r
			if !l.f.Matches(r.job) {
				l.skipped++
				if l.skipped >= store.ListScan {
					l.page.Next = l.cursor(r)
					return true, nil
				}
				continue
			}
			if len(l.page.Jobs) == l.f.Limit {
				l.page.Next = l.cursor(l.last)
				return true, nil
			}
			l.page.Jobs = append(l.page.Jobs, r.job)
			l.last = r
		}
		if len(rows) < n {
			return false, nil
		}
	}
}

// cursor is the list cursor after r.
func (l *lister) cursor(r listed) string {
	if len(l.f.States) == 0 {
		id := uuid.MustParse(r.id)
		return hex.EncodeToString(id[:])
	}
	return cursorOf(r)
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

// cursorOf is the list cursor after r: state | sort time | id, hex.
func cursorOf(r listed) string {
	k := make([]byte, 1+8+16)
	k[0] = stateByte[r.state]
	binary.BigEndian.PutUint64(k[1:9], uint64(r.sort)^1<<63)
	id := uuid.MustParse(r.id)
	copy(k[9:], id[:])
	return hex.EncodeToString(k)
}
