package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/internal/parallel"
	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// buckets groups the buckets of one transaction.
type buckets struct {
	meta, jobs, keys, index *bbolt.Bucket
	// hostdue is the index by host (bucketHostDue); nil in a schema 1
	// file opened read-only.
	hostdue *bbolt.Bucket
	// counts, in the writer's transactions, collects counter changes by
	// state byte; runBatch writes them once per transaction instead of
	// twice per state change.
	counts *counts
}

// counts is the counter changes of one write transaction.
type counts [8]int64

// flush writes the collected counter changes into meta and zeroes them.
func (c *counts) flush(meta *bbolt.Bucket) error {
	for sb, d := range c {
		if d == 0 {
			continue
		}
		c[sb] = 0
		if err := addCounter(meta, byteState[byte(sb)], d); err != nil {
			return err
		}
	}
	return nil
}

// writeBuckets is bucketsOf for the writer's transactions: counter changes
// are collected in db.counts and written by runBatch.
func (db *DB) writeBuckets(tx *bbolt.Tx) buckets {
	b := bucketsOf(tx)
	b.counts = &db.counts
	return b
}

func bucketsOf(tx *bbolt.Tx) buckets {
	return buckets{
		meta:    tx.Bucket(bucketMeta),
		jobs:    tx.Bucket(bucketJobs),
		keys:    tx.Bucket(bucketKeys),
		index:   tx.Bucket(bucketIndex),
		hostdue: tx.Bucket(bucketHostDue),
	}
}

func counterKey(s store.State) []byte { return []byte("count/" + string(s)) }

func (b buckets) addCount(s store.State, delta int64) error {
	if b.counts != nil {
		b.counts[stateByte[s]] += delta
		return nil
	}
	return addCounter(b.meta, s, delta)
}

func addCounter(meta *bbolt.Bucket, s store.State, delta int64) error {
	k := counterKey(s)
	var n int64
	if v := meta.Get(k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += delta
	if n < 0 {
		return fatal(fileErr(meta.Tx().DB().Path(), FileDamaged, fmt.Errorf("store: counter %s would go negative: the counters disagree with the jobs; Check reports the damage", s)))
	}
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, uint64(n))
	return fatal(meta.Put(k, v))
}

func (b buckets) load(id []byte) (*store.Job, error) {
	v := b.jobs.Get(id)
	if v == nil {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, uuid.UUID(id))
	}
	return DecodeRecord(v)
}

// insert stores a new job, already encoded as rec, with its key, index
// entry (valued ival, its indexValue) and counter.
func (b buckets) insert(j *store.Job, rec, ival []byte) error {
	id, err := idBytes(j.ID)
	if err != nil {
		return err
	}
	h, _ := parseHead(rec)
	if err := fatal(b.jobs.Put(id, rec)); err != nil {
		return err
	}
	if err := fatal(b.keys.Put([]byte(j.Key), id)); err != nil {
		return err
	}
	ik := h.indexKey(id)
	if err := fatal(b.index.Put(ik, ival)); err != nil {
		return err
	}
	if err := b.putHostDue(ik, ival); err != nil {
		return err
	}
	return b.addCount(byteState[h.state], 1)
}

// replace writes the new version of a job, moving its index entry and
// counters. old must be the record as loaded in this transaction.
func (b buckets) replace(old, j *store.Job) error {
	rec, err := encodeJob(j)
	if err != nil {
		return err
	}
	id, _ := idBytes(j.ID)
	oh, _ := parseHead(b.jobs.Get(id))
	return b.replaceRaw(id, oh, rec, indexValue(j))
}

// replaceRaw writes an encoded record over a job whose current head is
// oh, moving the index entry and counters by the heads alone. ival is the
// value of a moved entry (indexValue of the new record's job).
func (b buckets) replaceRaw(id []byte, oh head, rec, ival []byte) error {
	nh, ok := parseHead(rec)
	if !ok {
		return fatal(fmt.Errorf("store: bad encoded record for %x", id))
	}
	if err := fatal(b.jobs.Put(id, rec)); err != nil {
		return err
	}
	if oh.state != nh.state || oh.itime != nh.itime {
		ok, nk := oh.indexKey(id), nh.indexKey(id)
		if b.hostdue != nil {
			if err := b.deleteHostDue(ok, b.index.Get(ok)); err != nil {
				return err
			}
		}
		if err := fatal(b.index.Delete(ok)); err != nil {
			return err
		}
		if err := fatal(b.index.Put(nk, ival)); err != nil {
			return err
		}
		if err := b.putHostDue(nk, ival); err != nil {
			return err
		}
	}
	if oh.state != nh.state {
		if err := b.addCount(byteState[oh.state], -1); err != nil {
			return err
		}
		return b.addCount(byteState[nh.state], 1)
	}
	return nil
}

// remove deletes a job, its key reservation, index entry and count.
func (b buckets) remove(j *store.Job) error {
	id, _ := idBytes(j.ID)
	if err := fatal(b.jobs.Delete(id)); err != nil {
		return err
	}
	if v := b.keys.Get([]byte(j.Key)); bytes.Equal(v, id) {
		if err := fatal(b.keys.Delete([]byte(j.Key))); err != nil {
			return err
		}
	}
	ik := indexKeyOf(j)
	if b.hostdue != nil {
		if err := b.deleteHostDue(ik, b.index.Get(ik)); err != nil {
			return err
		}
	}
	if err := fatal(b.index.Delete(ik)); err != nil {
		return err
	}
	return b.addCount(j.State, -1)
}

func checkNew(j *store.Job) error {
	if err := store.CheckNew(j); err != nil {
		return err
	}
	u, err := uuid.Parse(j.ID)
	if err != nil {
		return fmt.Errorf("store: job id %q is not a UUID", j.ID)
	}
	j.ID = u.String()
	return nil
}

// enqueueIn inserts j (encoded as rec, its index value ival) or finds the
// job already holding its key.
func enqueueIn(b buckets, j *store.Job, rec, ival []byte) (store.EnqueueResult, error) {
	if id := b.keys.Get([]byte(j.Key)); id != nil {
		if len(id) == tombLen {
			return store.EnqueueResult{}, &store.KeyConflictError{Key: j.Key, JobID: uuid.UUID(id[:16]).String(), Deleted: timeFromKey(binary.BigEndian.Uint64(id[16:]))}
		}
		ex, err := b.load(id)
		if err != nil {
			return store.EnqueueResult{}, err
		}
		// The key format is part of what is sent (Idempotency-Key: k or
		// "k") and never changes (sameRequest), so a request asking for
		// another one is not the stored job.
		if ex.Fingerprint != j.Fingerprint || store.KeyFormatOf(ex) != store.KeyFormatOf(j) {
			return store.EnqueueResult{}, &store.KeyConflictError{Key: j.Key, JobID: ex.ID}
		}
		return store.EnqueueResult{Job: ex, Existing: true}, nil
	}
	id, _ := idBytes(j.ID)
	if b.jobs.Get(id) != nil {
		return store.EnqueueResult{}, fmt.Errorf("store: job id %s is already used by another job; give each job a new id (store.NewID)", j.ID)
	}
	if err := b.insert(j, rec, ival); err != nil {
		return store.EnqueueResult{}, err
	}
	return store.EnqueueResult{Job: j}, nil
}

// prepareNew checks a new job and encodes its record and index value,
// outside the writer.
func prepareNew(j *store.Job) (nj *store.Job, rec, ival []byte, err error) {
	nj = j.Clone()
	if err := checkNew(nj); err != nil {
		return nil, nil, nil, err
	}
	if rec, err = encodeJob(nj); err != nil {
		return nil, nil, nil, err
	}
	return nj, rec, indexValue(nj), nil
}

// Enqueue stores a new pending job. It returns after the job is committed
// to disk. If a job with the same key and fingerprint exists, that job is
// returned with Existing set and nothing is written; the same key with a
// different fingerprint is refused with a *KeyConflictError.
func (db *DB) Enqueue(ctx context.Context, j *store.Job) (store.EnqueueResult, error) {
	if err := ctx.Err(); err != nil {
		return store.EnqueueResult{}, err
	}
	nj, rec, ival, err := prepareNew(j)
	if err != nil {
		return store.EnqueueResult{}, err
	}
	var res store.EnqueueResult
	err = db.write(func(tx *bbolt.Tx) error {
		var err error
		res, err = enqueueIn(db.writeBuckets(tx), nj, rec, ival)
		var fe *fatalError
		if (err == nil && res.Existing) || (err != nil && !errors.As(err, &fe)) {
			// Already stored, or refused before anything was written.
			return nothingWritten(err)
		}
		return err
	})
	if err != nil {
		return store.EnqueueResult{}, err
	}
	// res.Job is nj, which prepareNew copied from the caller's job and
	// nothing else holds once the write is done.
	return res, nil
}

// EnqueueMany stores many jobs in one transaction, with Enqueue's key rules
// per job: each result carries its job, Existing, or its own refusal in Err.
// The returned error is non-nil only when nothing was committed.
func (db *DB) EnqueueMany(ctx context.Context, jobs []*store.Job) ([]store.EnqueueResult, error) {
	return db.EnqueueManyFunc(ctx, len(jobs), func(i int) (*store.Job, error) { return jobs[i], nil })
}

// manyChunk is how many jobs EnqueueManyFunc prepares before the writer
// may insert them: small enough that the writer starts early, large
// enough that handing chunks over costs nothing.
const manyChunk = 256

// EnqueueManyFunc is EnqueueMany for n jobs made by build: build(i) is
// called exactly once for each i in [0, n), from several goroutines at
// once, and an error it returns becomes result i's Err. The jobs are
// checked and encoded on all cores while the writer already inserts the
// first ones into the one transaction, so making the jobs and writing
// them overlap. build must not write to this store: above one chunk it
// runs while the writer waits for it. Every call of build has returned
// when EnqueueManyFunc returns. A call that inserts nothing (every job
// refused or already stored) commits nothing.
func (db *DB) EnqueueManyFunc(ctx context.Context, n int, build func(i int) (*store.Job, error)) ([]store.EnqueueResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("store: EnqueueManyFunc of %d jobs; want 0 or more", n)
	}
	if n == 0 {
		return nil, nil
	}
	in := make([]*store.Job, n)
	recs := make([][]byte, n)
	ivals := make([][]byte, n)
	pre := make([]error, n)
	made := parallel.Stream(n, manyChunk, func(i int) {
		j, err := build(i)
		switch {
		case err != nil:
			pre[i] = err
		case j == nil:
			pre[i] = fmt.Errorf("store: job %d of %d is nil", i, n)
		default:
			in[i], recs[i], ivals[i], pre[i] = prepareNew(j)
		}
	})
	defer made.Done()
	var out []store.EnqueueResult
	err := db.write(func(tx *bbolt.Tx) error {
		out = make([]store.EnqueueResult, n)
		b := db.writeBuckets(tx)
		inserted := false
		for k := range made.Chunks() {
			made.Wait(k)
			lo, hi := made.Chunk(k)
			for i := lo; i < hi; i++ {
				if pre[i] != nil {
					out[i].Err = pre[i]
					continue
				}
				r, err := enqueueIn(b, in[i], recs[i], ivals[i])
				var fe *fatalError
				if errors.As(err, &fe) {
					return err
				}
				r.Err = err
				out[i] = r
				inserted = inserted || (err == nil && !r.Existing)
			}
		}
		if !inserted {
			return nothingWritten(nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errRequestChanged refuses a write that changes what a job sends (P2: one
// key, one request, for life).
var errRequestChanged = errors.New("its request (method, URL, headers, body), fingerprint and key format never change after enqueue")

// Finish writes the outcome of a claim: it loads the job, refuses with
// ErrFenced unless its fence still equals fence, lets fn change it, checks
// the state change against the transition table and writes it.
func (db *DB) Finish(ctx context.Context, id string, fence uint64, fn store.TransitionFunc) (*store.Job, error) {
	return db.transition(id, func(j *store.Job) error {
		if j.Fence != fence {
			return fmt.Errorf("%w: job %s has fence %d, write carries %d", store.ErrFenced, j.ID, j.Fence, fence)
		}
		return fn(j)
	})
}

// transition is the one shape of every single-job change.
func (db *DB) transition(id string, fn store.TransitionFunc) (*store.Job, error) {
	idb, err := idBytes(id)
	if err != nil {
		return nil, err
	}
	var out *store.Job
	err = db.write(func(tx *bbolt.Tx) error {
		var err error
		out, err = transitionIn(db.writeBuckets(tx), idb, fn)
		return err
	})
	return out, err
}

// transitionIn loads the job idb, lets fn change a copy, checks the
// change and writes it. It writes nothing when it returns an error.
func transitionIn(b buckets, idb []byte, fn store.TransitionFunc) (*store.Job, error) {
	old, err := b.load(idb)
	if err != nil {
		return nil, err
	}
	j := old.Clone()
	var ferr error
	inCaller(func() { ferr = fn(j) })
	if ferr != nil {
		return nil, ferr
	}
	if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence || j.Owner != old.Owner {
		// Only a claim moves the fence and names the owner; a change
		// that rewound either would let a stale claim's write pass its
		// fence check again.
		return nil, fmt.Errorf("store: job %s: id, key, fence and owner never change in a transition", old.ID)
	}
	if !store.SameRequest(old, j) {
		return nil, fmt.Errorf("store: job %s: %w", old.ID, errRequestChanged)
	}
	if j.State != old.State && !store.Legal(old.State, j.State) {
		return nil, &store.TransitionError{JobID: j.ID, From: old.State, To: j.State}
	}
	if j.State == old.State && old.State.Terminal() {
		return nil, &store.TransitionError{JobID: j.ID, From: old.State, To: j.State, Why: "the job already ended"}
	}
	if err := b.replace(old, j); err != nil {
		return nil, err
	}
	return j, nil // a private copy: each run of the op clones afresh
}

// ManualMany applies the manual action fn to each job of ids in one
// transaction; a job refused or gone is left as it is, its error in
// errs.
func (db *DB) ManualMany(ctx context.Context, ids []string, fn store.TransitionFunc) ([]error, error) {
	if len(ids) > store.MaxBulkBatch {
		return nil, fmt.Errorf("store: %d jobs in one manual batch; at most %d", len(ids), store.MaxBulkBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := make([]error, len(ids))
	err := db.write(func(tx *bbolt.Tx) error {
		b := db.writeBuckets(tx)
		wrote := false
		for i, id := range ids {
			idb, err := idBytes(id)
			if err == nil {
				_, err = transitionIn(b, idb, fn)
			}
			var fe *fatalError
			if errors.As(err, &fe) {
				return err
			}
			errs[i] = err
			wrote = wrote || err == nil
		}
		if !wrote {
			return nothingWritten(nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// Cancel moves a pending job that cannot have had an effect to canceled.
func (db *DB) Cancel(ctx context.Context, id string, now time.Time, actor, note string) (*store.Job, error) {
	return db.transition(id, store.CancelJob(now, actor, note))
}

// Retry moves a failed job back to pending with the same key, a fresh
// attempt budget and a fresh deadline.
func (db *DB) Retry(ctx context.Context, id string, now time.Time, actor, note string) (*store.Job, error) {
	return db.transition(id, store.RetryJob(now, actor, note))
}

// Resolve ends a needs_attention job as succeeded or failed on a person's
// word, recording who and why.
func (db *DB) Resolve(ctx context.Context, id string, as store.State, now time.Time, actor, note string) (*store.Job, error) {
	fn, err := store.ResolveJob(as, now, actor, note)
	if err != nil {
		return nil, err
	}
	return db.transition(id, fn)
}

// tombLen is the length of a key entry that reserves the key of a deleted
// job: its id and the deletion time.
const tombLen = 16 + 8

// Sweep deletes up to limit jobs in end states (succeeded, failed,
// canceled) last updated before jobCutoff. A deleted job's key stays
// reserved (a tombstone: enqueueing it again is refused with
// ErrKeyConflict) until keyCutoff passes the job's last update;
// tombstones older than keyCutoff are released, up to limit per call.
// It returns how many jobs it deleted and how many key reservations it
// released, so a caller can loop until both are below limit. Both walks
// use indexes, so the cost does not grow with the number of live jobs.
func (db *DB) Sweep(ctx context.Context, jobCutoff, keyCutoff time.Time, limit int) (jobs, keys int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	n, released := 0, 0
	err = db.write(func(tx *bbolt.Tx) error {
		n, released = 0, 0
		b := db.writeBuckets(tx)
		tombs, err := tx.CreateBucketIfNotExists(bucketTombs)
		if err != nil {
			return fatal(err)
		}
		// Release tombstones whose reservation is over.
		var old [][]byte
		tc := tombs.Cursor()
		bound := make([]byte, 8)
		binary.BigEndian.PutUint64(bound, timeKey(keyCutoff))
		for k, _ := tc.First(); k != nil && bytes.Compare(k[:8], bound) < 0 && len(old) < limit; k, _ = tc.Next() {
			old = append(old, append([]byte(nil), k...))
		}
		released = len(old)
		for _, k := range old {
			key := tombs.Get(k)
			if v := b.keys.Get(key); len(v) == tombLen && bytes.Equal(v[:16], k[8:]) {
				if err := fatal(b.keys.Delete(key)); err != nil {
					return err
				}
			}
			if err := fatal(tombs.Delete(k)); err != nil {
				return err
			}
		}
		// A damaged record stays for `idemrun check` to report; it must not
		// stop the sweep of the others, nor take a place in the batch (a
		// batch short of limit tells the caller the sweep is done). At
		// most 10×limit of them are passed over per call.
		type swept struct {
			id []byte
			j  *store.Job
		}
		var batch []swept
		damaged := 0
	scan:
		for _, s := range []store.State{store.StateSucceeded, store.StateFailed, store.StateCanceled} {
			bound := dueBound(s, jobCutoff)
			c := b.index.Cursor()
			for k, _ := c.Seek([]byte{stateByte[s]}); k != nil && k[0] == stateByte[s] && len(batch) < limit; k, _ = c.Next() {
				if bytes.Compare(k[:9], bound) >= 0 {
					break
				}
				id := append([]byte(nil), k[9:]...)
				j, err := b.load(id)
				if err != nil {
					if damaged++; damaged > 10*limit {
						break scan
					}
					continue
				}
				batch = append(batch, swept{id, j})
			}
		}
		for _, e := range batch {
			id, j := e.id, e.j
			if err := b.remove(j); err != nil {
				return err
			}
			if j.UpdatedAt.After(keyCutoff) || j.UpdatedAt.Equal(keyCutoff) {
				// Keep the key reserved: a tombstone in the key map.
				tk := make([]byte, 8+16)
				binary.BigEndian.PutUint64(tk, timeKey(j.UpdatedAt))
				copy(tk[8:], id)
				tv := make([]byte, tombLen)
				copy(tv, id)
				binary.BigEndian.PutUint64(tv[16:], timeKey(j.UpdatedAt))
				if err := fatal(b.keys.Put([]byte(j.Key), tv)); err != nil {
					return err
				}
				if err := fatal(tombs.Put(tk, []byte(j.Key))); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	return n, released, err
}
