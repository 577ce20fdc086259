package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// Get returns the job with the given id.
func (db *DB) Get(id string) (*store.Job, error) {
	idb, err := idBytes(id)
	if err != nil {
		return nil, err
	}
	var j *store.Job
	err = db.view(func(tx *bbolt.Tx) error {
		var err error
		j, err = bucketsOf(tx).load(idb)
		return err
	})
	return j, err
}

// GetByKey returns the job holding an idempotency key.
func (db *DB) GetByKey(key string) (*store.Job, error) {
	var j *store.Job
	err := db.view(func(tx *bbolt.Tx) error {
		b := bucketsOf(tx)
		id := b.keys.Get([]byte(key))
		if id == nil {
			return fmt.Errorf("%w: no job has key %q", store.ErrNotFound, key)
		}
		if len(id) == tombLen {
			return fmt.Errorf("%w: the job that had key %q ended and was deleted by retention; the key stays reserved", store.ErrNotFound, key)
		}
		var err error
		j, err = b.load(id)
		return err
	})
	return j, err
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

// Stats returns the number of jobs in each state, read from counters kept in
// the same transactions as the jobs (constant time).
func (db *DB) Stats() (map[store.State]int64, error) {
	out := make(map[store.State]int64, len(stateByte))
	err := db.view(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		for _, s := range store.States() {
			var n int64
			if v := meta.Get(counterKey(s)); len(v) == 8 {
				n = int64(binary.BigEndian.Uint64(v))
			}
			out[s] = n
		}
		return nil
	})
	return out, err
}

// OldestDue returns the earliest next_run_at among jobs in state s, or the
// zero time when there are none.
func (db *DB) OldestDue(s store.State) (time.Time, error) {
	var t time.Time
	err := db.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketIndex).Cursor()
		k, _ := c.Seek([]byte{stateByte[s]})
		if k != nil && k[0] == stateByte[s] {
			t = timeFromKey(binary.BigEndian.Uint64(k[1:9]))
		}
		return nil
	})
	return t, err
}

// Check verifies the file: bbolt's own page consistency check, then
// idemrun's invariants: every record decodes, counters equal a full count,
// each job has exactly its index entry, and the key map and jobs agree. It
// reads everything, so it is for diagnosis, not for the hot path.
func (db *DB) Check() (store.CheckReport, error) {
	var rep store.CheckReport
	add := func(format string, a ...any) {
		if len(rep.Problems) < 100 {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, a...))
		}
	}
	// bbolt reads the newer of its two meta pages that passes its checksum
	// and says nothing of the other: a damaged one may have been the
	// newest, with the last commit.
	heads := readMetaHeads(db.path)
	for page := range 2 {
		found := false
		for _, m := range heads {
			if m.page == page {
				found = true
				if !m.ok {
					add("bbolt meta page %d fails its checksum: it is damaged, and bbolt reads the other one, which may lack the last commit; if jobs are missing, restore from a backup", page)
				}
			}
		}
		if !found {
			add("bbolt meta page %d is unreadable (no bbolt magic): it is damaged, and bbolt reads the other one, which may lack the last commit; if jobs are missing, restore from a backup", page)
		}
	}
	err := db.view(func(tx *bbolt.Tx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("store: check of %s stopped: the file is corrupt: %v", db.path, r)
			}
		}()
		for cerr := range tx.Check() {
			add("bbolt: %v", cerr)
		}
		b := bucketsOf(tx)
		for _, k := range [][]byte{metaSensitiveHeaders, metaSensitiveParams} {
			if _, err := decodeNames(b.meta.Get(k)); err != nil {
				add("meta %s: the recorded sensitive names do not decode (%v); every header and URL parameter value is shown redacted until the application opens the file with its sensitive names again, which rebuilds the list from those and the names still readable in it", k, err)
			}
		}
		counts := map[store.State]int64{}
		wantIndex := map[string]bool{}
		keyOf := map[string]string{} // job id bytes → its key
		if err := b.jobs.ForEach(func(k, v []byte) error {
			rep.Jobs++
			j, err := DecodeRecord(v)
			if err != nil {
				add("job %x: %v", k, err)
				return nil
			}
			id, _ := idBytes(j.ID)
			if !bytes.Equal(id, k) {
				add("job %x: record says id %s", k, j.ID)
			}
			counts[j.State]++
			keyOf[string(k)] = j.Key
			ik := indexKeyOf(j)
			wantIndex[string(ik)] = true
			if iv := b.index.Get(ik); iv == nil {
				add("job %s (%s): index entry missing", j.ID, j.State)
			} else if h, ok := entryHost(iv); ok && string(h) != store.ClaimHost(j) {
				add("job %s (%s): index entry names host %q, the job's claims go to %q", j.ID, j.State, h, store.ClaimHost(j))
			}
			if kv := b.keys.Get([]byte(j.Key)); !bytes.Equal(kv, k) {
				add("job %s: key %q maps to %x", j.ID, j.Key, kv)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := b.index.ForEach(func(k, _ []byte) error {
			if !wantIndex[string(k)] {
				add("index entry %x has no matching job", k)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := checkHostDue(tx, add); err != nil {
			return err
		}
		tombs := tx.Bucket(bucketTombs)
		if err := b.keys.ForEach(func(k, v []byte) error {
			if len(v) == tombLen {
				tk := make([]byte, 8+16)
				copy(tk, v[16:])
				copy(tk[8:], v[:16])
				if b.jobs.Get(v[:16]) != nil {
					add("key %q is reserved for deleted job %x, which exists", k, v[:16])
				} else if tombs == nil || !bytes.Equal(tombs.Get(tk), k) {
					add("key %q reservation has no tombstone entry", k)
				}
				return nil
			}
			if b.jobs.Get(v) == nil {
				add("key %q maps to missing job %x", k, v)
			} else if jk, ok := keyOf[string(v)]; ok && jk != string(k) {
				add("key %q maps to job %x, whose key is %q", k, v, jk)
			}
			return nil
		}); err != nil {
			return err
		}
		meta := b.meta
		for _, s := range store.States() {
			var n int64
			if v := meta.Get(counterKey(s)); len(v) == 8 {
				n = int64(binary.BigEndian.Uint64(v))
			}
			if n != counts[s] {
				add("counter %s = %d, jobs in %s = %d", s, n, s, counts[s])
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrCorruptRecord) {
		return rep, err
	}
	return rep, nil
}

// CursorFits is the function CursorFits for this store, so a client that
// holds the store as a store.Store can check a cursor before listing.
func (db *DB) CursorFits(cursor string, states []store.State) bool {
	return CursorFits(cursor, states)
}
