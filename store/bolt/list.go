package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// List returns a page of jobs (store.ListFilter). Without a state filter
// it walks the jobs bucket (ids are time-ordered), newest first; with one
// it walks each state's index, so its cost depends on the page, not on
// how many jobs are stored. The other filters are checked on the way;
// Since and Until bound the walk of states indexed by update time, and
// IDPrefix the walk of ids.
func (db *DB) List(f store.ListFilter) (store.ListPage, error) {
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
		if stateByte[s] == 0 {
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
	w := &walk{f: f, limit: f.Limit, scan: store.ListScan}
	err = db.view(func(tx *bbolt.Tx) error {
		b := bucketsOf(tx)
		if len(f.States) == 0 {
			_, err := w.jobs(b, cur)
			return err
		}
		// States in the order given; the cursor names the state it stopped in.
		started := cur == nil
		for _, s := range f.States {
			var from []byte
			if !started {
				if cur[0] != stateByte[s] {
					continue
				}
				started, from = true, cur
			}
			if done, err := w.state(b, s, from, oldest); done || err != nil {
				return err
			}
		}
		return nil
	})
	return w.page, err
}

// MatchIDs returns the ids of up to max jobs f matches, from one read
// transaction.
func (db *DB) MatchIDs(f store.ListFilter, max int) ([]string, bool, error) {
	if len(f.States) == 0 {
		return nil, false, fmt.Errorf("store: matching jobs needs a state filter")
	}
	for _, s := range f.States {
		if stateByte[s] == 0 {
			return nil, false, fmt.Errorf("store: unknown state %q", s)
		}
	}
	w := &walk{f: f, limit: max, ids: true}
	err := db.view(func(tx *bbolt.Tx) error {
		b := bucketsOf(tx)
		for _, s := range f.States {
			if done, err := w.state(b, s, nil, false); done || err != nil {
				return err
			}
		}
		return nil
	})
	return w.idList, w.page.Next != "", err
}

// walk collects the jobs of a list (or their ids) as it passes over
// entries of the jobs bucket or the index.
type walk struct {
	f     store.ListFilter
	limit int
	scan  int  // entries passed over before a page ends early; 0: no bound
	ids   bool // collect ids in idList, not jobs

	page    store.ListPage
	idList  []string
	n       int    // jobs collected
	last    []byte // the cursor key of the last job collected
	skipped int
}

// visit takes one entry, at cursor key k: skip says it fails the filter
// without reading its job; load reads the job. It reports whether the
// walk is over: one more job matched after a full page (Next is then
// set after the page's last job), or the scan bound was reached (Next
// is then set after k).
func (w *walk) visit(k []byte, skip bool, load func() (*store.Job, error)) (bool, error) {
	if !skip {
		j, err := load()
		if err != nil {
			return true, err
		}
		if w.f.Matches(j) {
			return w.take(k, j, ""), nil
		}
	}
	w.skipped++
	if w.scan > 0 && w.skipped >= w.scan {
		w.page.Next = hex.EncodeToString(k)
		return true, nil
	}
	return false, nil
}

// take collects a matching job (or, for ids, its id alone) at cursor key
// k; it reports whether the walk is over: the page was full already, and
// Next is set after its last job.
func (w *walk) take(k []byte, j *store.Job, id string) bool {
	if w.n == w.limit {
		w.page.Next = hex.EncodeToString(w.last)
		return true
	}
	w.n++
	switch {
	case j == nil:
		w.idList = append(w.idList, id)
	case w.ids:
		w.idList = append(w.idList, j.ID)
	default:
		w.page.Jobs = append(w.page.Jobs, j)
	}
	w.last = append(w.last[:0], k...)
	return false
}

// jobs walks the jobs bucket, newest id first, after the id cur.
func (w *walk) jobs(b buckets, cur []byte) (bool, error) {
	var lo, hi []byte
	if w.f.IDPrefix != "" {
		l, h, ok := store.IDRange(w.f.IDPrefix)
		if !ok {
			return true, nil
		}
		lu, hu := uuid.MustParse(l), uuid.MustParse(h)
		lo, hi = lu[:], after(hu[:])
	}
	return walkRange(b.jobs.Cursor(), lo, hi, cur, false, func(k, v []byte) (bool, error) {
		return w.visit(k, false, func() (*store.Job, error) { return DecodeRecord(v) })
	})
}

// state walks the index entries of state s, after the key from when it
// is set, oldest first or newest first.
func (w *walk) state(b buckets, s store.State, from []byte, oldest bool) (bool, error) {
	sb := stateByte[s]
	lo, hi := []byte{sb}, []byte{sb + 1}
	if s != store.StatePending && s != store.StateUnknown {
		// Indexed by update time: Since and Until bound the walk.
		if !w.f.Since.IsZero() {
			lo = timeBound(sb, w.f.Since)
		}
		if !w.f.Until.IsZero() {
			hi = timeBound(sb, w.f.Until)
		}
	}
	var idLo, idHi string
	if w.f.IDPrefix != "" {
		var ok bool
		if idLo, idHi, ok = store.IDRange(w.f.IDPrefix); !ok {
			return false, nil
		}
	}
	// What the entry alone cannot decide: the key, an update time the
	// index does not order by, the host of a job whose entry does not
	// name its target (only a pending job's does).
	due := s == store.StatePending || s == store.StateUnknown
	needJob := w.f.KeyPrefix != "" || (due && (!w.f.Since.IsZero() || !w.f.Until.IsZero())) ||
		(w.f.Host != "" && s != store.StatePending)
	return walkRange(b.index.Cursor(), lo, hi, from, oldest, func(k, v []byte) (bool, error) {
		skip := false
		id := ""
		if idLo != "" || w.ids {
			id = uuid.UUID(k[9:]).String()
			skip = idLo != "" && (id < idLo || id > idHi)
		}
		h, named := entryHost(v)
		if named && s == store.StatePending && w.f.Host != "" && string(h) != w.f.Host {
			// A pending job's claims go to its target: the entry names it.
			skip = true
		}
		if w.ids && !skip && !needJob && (w.f.Host == "" || named) {
			return w.take(k, nil, id), nil
		}
		return w.visit(k, skip, func() (*store.Job, error) { return b.load(k[9:]) })
	})
}

// walkRange calls fn on the keys of c in [lo, hi) (nil: open), forwards
// or backwards, after the key from (exclusive) when it is set, until fn
// says it is done.
func walkRange(c *bbolt.Cursor, lo, hi, from []byte, forward bool, fn func(k, v []byte) (bool, error)) (bool, error) {
	var k, v []byte
	if forward {
		start := lo
		if from != nil && bytes.Compare(from, lo) >= 0 {
			start = from
		}
		if start == nil {
			k, v = c.First()
		} else {
			k, v = c.Seek(start)
		}
		if from != nil && bytes.Equal(k, from) {
			k, v = c.Next()
		}
		for ; k != nil && (hi == nil || bytes.Compare(k, hi) < 0); k, v = c.Next() {
			if done, err := fn(k, v); done || err != nil {
				return done, err
			}
		}
		return false, nil
	}
	end := hi // exclusive
	if from != nil && (end == nil || bytes.Compare(from, end) < 0) {
		end = from
	}
	if end == nil {
		k, v = c.Last()
	} else if k, v = c.Seek(end); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	for ; k != nil && (lo == nil || bytes.Compare(k, lo) >= 0); k, v = c.Prev() {
		if done, err := fn(k, v); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// timeBound is the index key prefix state | time of t.
func timeBound(sb byte, t time.Time) []byte {
	k := make([]byte, 9)
	k[0] = sb
	binary.BigEndian.PutUint64(k[1:], timeKey(t))
	return k
}

// after is the smallest key above every key that begins with k, nil when
// none is (k all 0xff).
func after(k []byte) []byte {
	out := append([]byte(nil), k...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] < 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}
