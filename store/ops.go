package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/internal/parallel"
	bolt "go.etcd.io/bbolt"
)

// buckets groups the buckets of one transaction.
type buckets struct {
	meta, jobs, keys, index *bolt.Bucket
	// counts, in the writer's transactions, collects counter changes by
	// state byte; runBatch writes them once per transaction instead of
	// twice per state change.
	counts *counts
}

// counts is the counter changes of one write transaction.
type counts [8]int64

// flush writes the collected counter changes into meta and zeroes them.
func (c *counts) flush(meta *bolt.Bucket) error {
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
func (db *DB) writeBuckets(tx *bolt.Tx) buckets {
	b := bucketsOf(tx)
	b.counts = &db.counts
	return b
}

func bucketsOf(tx *bolt.Tx) buckets {
	return buckets{
		meta:  tx.Bucket(bucketMeta),
		jobs:  tx.Bucket(bucketJobs),
		keys:  tx.Bucket(bucketKeys),
		index: tx.Bucket(bucketIndex),
	}
}

func counterKey(s State) []byte { return []byte("count/" + string(s)) }

func (b buckets) addCount(s State, delta int64) error {
	if b.counts != nil {
		b.counts[stateByte[s]] += delta
		return nil
	}
	return addCounter(b.meta, s, delta)
}

func addCounter(meta *bolt.Bucket, s State, delta int64) error {
	k := counterKey(s)
	var n int64
	if v := meta.Get(k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += delta
	if n < 0 {
		return fatal(fmt.Errorf("store: counter %s would go negative; run `idemrun check`", s))
	}
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, uint64(n))
	return fatal(meta.Put(k, v))
}

func (b buckets) load(id []byte) (*Job, error) {
	v := b.jobs.Get(id)
	if v == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, uuid.UUID(id))
	}
	return DecodeRecord(v)
}

// insert stores a new job, already encoded as rec, with its key, index
// entry and counter.
func (b buckets) insert(j *Job, rec []byte) error {
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
	if err := fatal(b.index.Put(h.indexKey(id), nil)); err != nil {
		return err
	}
	return b.addCount(byteState[h.state], 1)
}

// replace writes the new version of a job, moving its index entry and
// counters. old must be the record as loaded in this transaction.
func (b buckets) replace(old, j *Job) error {
	rec, err := encodeJob(j)
	if err != nil {
		return err
	}
	id, _ := idBytes(j.ID)
	oh, _ := parseHead(b.jobs.Get(id))
	return b.replaceRaw(id, oh, rec)
}

// replaceRaw writes an encoded record over a job whose current head is
// oh, moving the index entry and counters by the heads alone.
func (b buckets) replaceRaw(id []byte, oh head, rec []byte) error {
	nh, ok := parseHead(rec)
	if !ok {
		return fatal(fmt.Errorf("store: bad encoded record for %x", id))
	}
	if err := fatal(b.jobs.Put(id, rec)); err != nil {
		return err
	}
	if oh.state != nh.state || oh.itime != nh.itime {
		if err := fatal(b.index.Delete(oh.indexKey(id))); err != nil {
			return err
		}
		if err := fatal(b.index.Put(nh.indexKey(id), nil)); err != nil {
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
func (b buckets) remove(j *Job) error {
	id, _ := idBytes(j.ID)
	if err := fatal(b.jobs.Delete(id)); err != nil {
		return err
	}
	if v := b.keys.Get([]byte(j.Key)); bytes.Equal(v, id) {
		if err := fatal(b.keys.Delete([]byte(j.Key))); err != nil {
			return err
		}
	}
	if err := fatal(b.index.Delete(indexKeyOf(j))); err != nil {
		return err
	}
	return b.addCount(j.State, -1)
}

// EnqueueResult is the outcome of enqueuing one job.
type EnqueueResult struct {
	Job *Job
	// Existing is true when the key already held the same request; Job is
	// then the stored job and nothing was written.
	Existing bool
	// Err is a refusal for this job alone (EnqueueMany): a key conflict or
	// an invalid record.
	Err error
}

// NewID returns a new job id (a UUIDv7: time-ordered, so inserts append to
// the jobs bucket and the id shows creation order).
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

func checkNew(j *Job) error {
	switch {
	case j.ID == "":
		return errors.New("store: job has no id")
	case j.Key == "":
		return errors.New("store: job has no idempotency key")
	case j.Fingerprint == "":
		return errors.New("store: job has no fingerprint")
	case j.State != StatePending:
		return fmt.Errorf("store: a new job must be pending, not %q", j.State)
	case j.NextRunAt.IsZero() || j.CreatedAt.IsZero():
		return errors.New("store: a new job needs created_at and next_run_at")
	}
	u, err := uuid.Parse(j.ID)
	if err != nil {
		return fmt.Errorf("store: job id %q is not a UUID", j.ID)
	}
	j.ID = u.String()
	return nil
}

// enqueueIn inserts j (encoded as rec) or finds the job already holding
// its key.
func enqueueIn(b buckets, j *Job, rec []byte) (EnqueueResult, error) {
	if id := b.keys.Get([]byte(j.Key)); id != nil {
		if len(id) == tombLen {
			return EnqueueResult{}, &KeyConflictError{Key: j.Key, JobID: uuid.UUID(id[:16]).String(), Deleted: timeFromKey(binary.BigEndian.Uint64(id[16:]))}
		}
		ex, err := b.load(id)
		if err != nil {
			return EnqueueResult{}, err
		}
		// The key format is part of what is sent (Idempotency-Key: k or
		// "k") and never changes (sameRequest), so a request asking for
		// another one is not the stored job.
		if ex.Fingerprint != j.Fingerprint || keyFormatOf(ex) != keyFormatOf(j) {
			return EnqueueResult{}, &KeyConflictError{Key: j.Key, JobID: ex.ID}
		}
		return EnqueueResult{Job: ex, Existing: true}, nil
	}
	id, _ := idBytes(j.ID)
	if b.jobs.Get(id) != nil {
		return EnqueueResult{}, fmt.Errorf("store: job id %s is already used by another job; give each job a new id (store.NewID)", j.ID)
	}
	if err := b.insert(j, rec); err != nil {
		return EnqueueResult{}, err
	}
	return EnqueueResult{Job: j}, nil
}

// keyFormatOf is j's key format with the default spelled one way ("" and
// "token" are both the token format); every comparison of key formats
// goes through it.
func keyFormatOf(j *Job) string {
	if j.KeyFormat == "token" {
		return ""
	}
	return j.KeyFormat
}

// prepareNew checks a new job and encodes it, outside the writer.
func prepareNew(j *Job) (*Job, []byte, error) {
	nj := j.clone()
	if err := checkNew(nj); err != nil {
		return nil, nil, err
	}
	rec, err := encodeJob(nj)
	if err != nil {
		return nil, nil, err
	}
	return nj, rec, nil
}

// Enqueue stores a new pending job. It returns after the job is committed
// to disk. If a job with the same key and fingerprint exists, that job is
// returned with Existing set and nothing is written; the same key with a
// different fingerprint is refused with a *KeyConflictError.
func (db *DB) Enqueue(ctx context.Context, j *Job) (EnqueueResult, error) {
	if err := ctx.Err(); err != nil {
		return EnqueueResult{}, err
	}
	nj, rec, err := prepareNew(j)
	if err != nil {
		return EnqueueResult{}, err
	}
	var res EnqueueResult
	err = db.write(func(tx *bolt.Tx) error {
		var err error
		res, err = enqueueIn(db.writeBuckets(tx), nj, rec)
		var fe *fatalError
		if (err == nil && res.Existing) || (err != nil && !errors.As(err, &fe)) {
			// Already stored, or refused before anything was written.
			return nothingWritten(err)
		}
		return err
	})
	if err != nil {
		return EnqueueResult{}, err
	}
	// res.Job is nj, which prepareNew copied from the caller's job and
	// nothing else holds once the write is done.
	return res, nil
}

// EnqueueMany stores many jobs in one transaction, with Enqueue's key rules
// per job: each result carries its job, Existing, or its own refusal in Err.
// The returned error is non-nil only when nothing was committed.
func (db *DB) EnqueueMany(ctx context.Context, jobs []*Job) ([]EnqueueResult, error) {
	return db.EnqueueManyFunc(ctx, len(jobs), func(i int) (*Job, error) { return jobs[i], nil })
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
func (db *DB) EnqueueManyFunc(ctx context.Context, n int, build func(i int) (*Job, error)) ([]EnqueueResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("store: EnqueueManyFunc of %d jobs; want 0 or more", n)
	}
	if n == 0 {
		return nil, nil
	}
	in := make([]*Job, n)
	recs := make([][]byte, n)
	pre := make([]error, n)
	made := parallel.Stream(n, manyChunk, func(i int) {
		j, err := build(i)
		switch {
		case err != nil:
			pre[i] = err
		case j == nil:
			pre[i] = fmt.Errorf("store: job %d of %d is nil", i, n)
		default:
			in[i], recs[i], pre[i] = prepareNew(j)
		}
	})
	defer made.Done()
	var out []EnqueueResult
	err := db.write(func(tx *bolt.Tx) error {
		out = make([]EnqueueResult, n)
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
				r, err := enqueueIn(b, in[i], recs[i])
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

// Claim is a job handed to a worker, with the fence its writes must carry.
type Claim struct {
	Job   *Job
	Fence uint64
	// raw is the record the claim wrote; FinishClaim writes only over
	// exactly these bytes.
	raw []byte
}

// ClaimFunc prepares a claimed job: it sets what the claim records (the
// attempt event, a lease on next_run_at). It must not fail.
type ClaimFunc func(j *Job)

// ClaimDue claims up to limit due jobs of state s (pending or unknown) whose
// next_run_at is at or before now, walking the due index in time order.
// Pending jobs move to running with Attempts and Fence increased; unknown
// jobs stay unknown with Fence increased. prepare sees each claimed job
// before it is written (e.g. to append the "attempt N started" event); the
// claim is durable when ClaimDue returns, before any byte is sent.
//
// Records are read, changed and encoded in a read transaction in the
// caller's goroutine; the writer then commits each claim only if the
// record is still byte for byte what was read (compare and swap), so
// concurrent claimers never claim a job twice.
func (db *DB) ClaimDue(ctx context.Context, s State, now time.Time, limit int, prepare ClaimFunc) ([]Claim, error) {
	return db.ClaimDueSkip(ctx, s, now, limit, nil, prepare)
}

// ClaimDueSkip is ClaimDue with a skip hook: skip is called with the id of
// each due candidate and returns true to leave it to someone else. A
// runner with overlapping claim rounds uses it to mark candidates it is
// claiming, so its rounds do not collide.
func (db *DB) ClaimDueSkip(ctx context.Context, s State, now time.Time, limit int, skip func(id string) bool, prepare ClaimFunc) ([]Claim, error) {
	cands, err := db.PrepareClaims(ctx, s, now, limit, skip, prepare)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	var out []Claim
	err = db.write(func(tx *bolt.Tx) error {
		out = out[:0]
		b := db.writeBuckets(tx)
		for i := range cands {
			c, err := cands[i].claimIn(b)
			if err != nil {
				return err // fatal: a refusal after earlier claims were written must not commit them
			}
			if c != nil {
				out = append(out, *c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Candidate is a due job read and prepared for a claim that is not written
// yet (PrepareClaims). Writing it (FinishClaimNext) succeeds only if the
// stored record is still exactly the one read.
type Candidate struct {
	id, old, rec []byte
	job          *Job
}

// ID is the candidate job's id.
func (c *Candidate) ID() string { return c.job.ID }

// claimIn writes the candidate's claim if the stored record is still the
// one it was prepared from, and returns nil otherwise (another claimer or
// a change won). Its errors are fatal.
func (c *Candidate) claimIn(b buckets) (*Claim, error) {
	v := b.jobs.Get(c.id)
	if !bytes.Equal(v, c.old) {
		return nil, nil
	}
	oh, _ := parseHead(v)
	if err := b.replaceRaw(c.id, oh, c.rec); err != nil {
		return nil, err
	}
	return &Claim{Job: c.job, Fence: c.job.Fence, raw: c.rec}, nil
}

// PrepareClaims reads up to limit due jobs of state s (pending or unknown),
// oldest next_run_at first, passing over those skip returns true for, and
// prepares their claims (see ClaimDue) without writing anything. The
// reading and encoding happen in the caller's goroutine, not the writer's.
func (db *DB) PrepareClaims(ctx context.Context, s State, now time.Time, limit int, skip func(id string) bool, prepare ClaimFunc) ([]Candidate, error) {
	if s != StatePending && s != StateUnknown {
		return nil, fmt.Errorf("store: only pending or unknown jobs are claimed, not %s", s)
	}
	if limit <= 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	var cands []Candidate
	err := db.view(func(tx *bolt.Tx) error {
		b := bucketsOf(tx)
		prefix := stateByte[s]
		bound := dueBound(s, now)
		c := b.index.Cursor()
		for k, _ := c.Seek([]byte{prefix}); k != nil && k[0] == prefix && len(cands) < limit; k, _ = c.Next() {
			if bytes.Compare(k[:9], bound) > 0 {
				break
			}
			id := append([]byte(nil), k[9:]...)
			skipped := false
			if skip != nil {
				inCaller(func() { skipped = skip(uuid.UUID(id).String()) })
			}
			if skipped {
				continue
			}
			v := b.jobs.Get(id)
			if v == nil {
				continue // a damaged index must not stop the other jobs; `idemrun check` reports it
			}
			j, err := DecodeRecord(v)
			if err != nil {
				continue // likewise for a damaged record
			}
			rec, err := claimed(j, s, now, prepare)
			if err != nil {
				return err
			}
			cands = append(cands, Candidate{id: id, old: append([]byte(nil), v...), rec: rec, job: j})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cands, nil
}

// claimed turns a due job of state s into its claimed form (a new fence;
// pending becomes running with one more attempt, unknown counts one more
// status query), lets prepare add to it and encodes it.
func claimed(j *Job, s State, now time.Time, prepare ClaimFunc) ([]byte, error) {
	j.Fence++
	j.UpdatedAt = now
	if s == StatePending {
		j.State = StateRunning
		j.Attempts++
		if j.FirstSentAt.IsZero() {
			j.FirstSentAt = now
		}
	} else {
		j.StatusQueries++
	}
	if prepare != nil {
		inCaller(func() { prepare(j) })
	}
	return encodeJob(j)
}

// FinishClaim writes the outcome of a claim without reading the job again:
// fn changes a copy of the claimed job, which is checked against the
// transition table and encoded in the caller's goroutine; the writer
// commits it only if the stored record is still exactly the one the claim
// wrote, and refuses with ErrFenced otherwise.
func (db *DB) FinishClaim(ctx context.Context, c Claim, fn TransitionFunc) (*Job, error) {
	j, _, err := db.FinishClaimNext(ctx, c, fn, nil)
	return j, err
}

// finishRecord applies fn to a copy of the claimed job, checks the change
// and encodes it, all outside the writer.
func finishRecord(c Claim, fn TransitionFunc) (*Job, []byte, []byte, error) {
	old := c.Job
	if old.State.Terminal() {
		return nil, nil, nil, &TransitionError{JobID: old.ID, From: old.State, To: old.State, Why: "the job already ended"}
	}
	j := old.clone()
	if err := fn(j); err != nil {
		return nil, nil, nil, err
	}
	if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence {
		return nil, nil, nil, fmt.Errorf("store: job %s: id, key and fence never change in a finish", old.ID)
	}
	if !sameRequest(old, j) {
		return nil, nil, nil, fmt.Errorf("store: job %s: %w", old.ID, errRequestChanged)
	}
	if j.State != old.State && !Legal(old.State, j.State) {
		return nil, nil, nil, &TransitionError{JobID: j.ID, From: old.State, To: j.State}
	}
	rec, err := encodeJob(j)
	if err != nil {
		return nil, nil, nil, err
	}
	id, err := idBytes(j.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	return j, id, rec, nil
}

// finishIn writes a finish's record if the stored one is still exactly
// the one the claim wrote.
func finishIn(b buckets, c Claim, id, rec []byte) error {
	v := b.jobs.Get(id)
	if !bytes.Equal(v, c.raw) {
		return fmt.Errorf("%w: job %s changed since claim %d", ErrFenced, c.Job.ID, c.Fence)
	}
	oh, _ := parseHead(v)
	return b.replaceRaw(id, oh, rec)
}

// NextClaim asks FinishClaimNext to claim one more due job in the
// transaction of the finish.
type NextClaim struct {
	// Now is the clock reading that decides what is due.
	Now time.Time
	// Skip, when set, passes over the jobs it returns true for (a claim
	// round's candidates). The writer goroutine calls it: it must be quick
	// and must not use the store.
	Skip func(id string) bool
	// Pending prepares a claimed pending job, Unknown a claimed unknown
	// one, as ClaimDue's prepare does.
	Pending, Unknown ClaimFunc
}

// nextScan bounds the index entries one chained claim looks at (passed
// over by Skip, or damaged) before it gives up and leaves the work to
// ClaimDue.
const nextScan = 64

// FinishClaimNext is FinishClaim plus, when next is not nil and in the same
// transaction, the claim of the due job (pending or unknown) with the
// earliest next_run_at: a worker's outcome write and its next claim cost
// one commit wait, not two. The claim is nil when next is nil, when
// nothing is due, or when the finish was refused (the refusal is returned
// as FinishClaim does). A returned claim is durable, exactly as one from
// ClaimDue.
func (db *DB) FinishClaimNext(ctx context.Context, c Claim, fn TransitionFunc, next *NextClaim) (*Job, *Claim, error) {
	if c.raw == nil {
		j, err := db.Finish(ctx, c.Job.ID, c.Fence, fn)
		return j, nil, err
	}
	j, id, rec, err := finishRecord(c, fn)
	if err != nil {
		return nil, nil, err
	}
	var nc *Claim
	err = db.write(func(tx *bolt.Tx) error {
		nc = nil // the op may run again alone if its batch fails
		b := db.writeBuckets(tx)
		if err := finishIn(b, c, id, rec); err != nil || next == nil {
			return err
		}
		var err error
		nc, err = claimNextIn(b, *next)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return j, nc, nil
}

// claimNextIn claims, inside a write transaction, the due pending or
// unknown job with the earliest next_run_at. Only bbolt write errors
// (fatal) are returned: the finish before it is already written.
func claimNextIn(b buckets, next NextClaim) (*Claim, error) {
	type lane struct {
		s      State
		prefix byte
		bound  []byte
		c      *bolt.Cursor
		k      []byte // the lane's first acceptable due entry, nil if none
	}
	lanes := [2]lane{{s: StatePending}, {s: StateUnknown}}
	budget := nextScan
	// advance moves a lane to its first due entry at or after k that Skip
	// does not pass over.
	advance := func(l *lane, k []byte) {
		for ; k != nil && k[0] == l.prefix && budget > 0; k, _ = l.c.Next() {
			if bytes.Compare(k[:9], l.bound) > 0 {
				break
			}
			skip := false
			if next.Skip != nil {
				inCaller(func() { skip = next.Skip(uuid.UUID(k[9:]).String()) })
			}
			if !skip {
				l.k = k
				return
			}
			budget--
		}
		l.k = nil
	}
	for i := range lanes {
		l := &lanes[i]
		l.prefix = stateByte[l.s]
		l.bound = dueBound(l.s, next.Now)
		l.c = b.index.Cursor()
		k, _ := l.c.Seek([]byte{l.prefix})
		advance(l, k)
	}
	for budget > 0 {
		l := &lanes[0]
		if l.k == nil || (lanes[1].k != nil && bytes.Compare(lanes[1].k[1:9], l.k[1:9]) < 0) {
			l = &lanes[1]
		}
		if l.k == nil {
			return nil, nil
		}
		id := append([]byte(nil), l.k[9:]...)
		v := b.jobs.Get(id)
		var j *Job
		if v != nil {
			j, _ = DecodeRecord(v)
		}
		if j == nil {
			// A damaged index entry or record: `idemrun check` reports
			// it; the claim moves on.
			budget--
			k, _ := l.c.Next()
			advance(l, k)
			continue
		}
		prepare := next.Pending
		if l.s == StateUnknown {
			prepare = next.Unknown
		}
		rec, err := claimed(j, l.s, next.Now, prepare)
		if err != nil {
			// The finish is already written, so this must not refuse the
			// op: leave the job to ClaimDue, which reports the error.
			return nil, nil
		}
		oh, _ := parseHead(v)
		if err := b.replaceRaw(id, oh, rec); err != nil {
			return nil, err
		}
		return &Claim{Job: j, Fence: j.Fence, raw: rec}, nil
	}
	return nil, nil
}

// errRequestChanged refuses a write that changes what a job sends (P2: one
// key, one request, for life).
var errRequestChanged = errors.New("its request (method, URL, headers, body), fingerprint and key format never change after enqueue")

// sameRequest reports whether a and b send the same bytes with the same
// key: method, URL, headers in order, body, fingerprint and key format.
func sameRequest(a, b *Job) bool {
	return a.Request.Method == b.Request.Method && a.Request.URL == b.Request.URL &&
		slices.Equal(a.Request.Header, b.Request.Header) && bytes.Equal(a.Request.Body, b.Request.Body) &&
		a.Fingerprint == b.Fingerprint && keyFormatOf(a) == keyFormatOf(b)
}

// TransitionFunc changes a loaded job (state, fields, history). Returning an
// error refuses the change; nothing is written.
type TransitionFunc func(j *Job) error

// Finish writes the outcome of a claim: it loads the job, refuses with
// ErrFenced unless its fence still equals fence, lets fn change it, checks
// the state change against the transition table and writes it.
func (db *DB) Finish(ctx context.Context, id string, fence uint64, fn TransitionFunc) (*Job, error) {
	return db.transition(id, func(j *Job) error {
		if j.Fence != fence {
			return fmt.Errorf("%w: job %s has fence %d, write carries %d", ErrFenced, j.ID, j.Fence, fence)
		}
		return fn(j)
	})
}

// transition is the one shape of every single-job change.
func (db *DB) transition(id string, fn TransitionFunc) (*Job, error) {
	idb, err := idBytes(id)
	if err != nil {
		return nil, err
	}
	var out *Job
	err = db.write(func(tx *bolt.Tx) error {
		out = nil
		b := db.writeBuckets(tx)
		old, err := b.load(idb)
		if err != nil {
			return err
		}
		j := old.clone()
		var ferr error
		inCaller(func() { ferr = fn(j) })
		if ferr != nil {
			return ferr
		}
		if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence {
			// Only a claim moves the fence; a change that rewound it would
			// let a stale claim's write pass its fence check again.
			return fmt.Errorf("store: job %s: id, key and fence never change in a transition", old.ID)
		}
		if !sameRequest(old, j) {
			return fmt.Errorf("store: job %s: %w", old.ID, errRequestChanged)
		}
		if j.State != old.State && !Legal(old.State, j.State) {
			return &TransitionError{JobID: j.ID, From: old.State, To: j.State}
		}
		if j.State == old.State && old.State.Terminal() {
			return &TransitionError{JobID: j.ID, From: old.State, To: j.State, Why: "the job already ended"}
		}
		if err := b.replace(old, j); err != nil {
			return err
		}
		out = j // a private copy: each run of the op clones afresh
		return nil
	})
	return out, err
}

// RecoverRunning moves every job left running by a crash to unknown: its
// attempt may have reached the server. fn sets the rest (next_run_at, the
// history entry). It walks only the running part of the index, in batches,
// and returns how many jobs it moved.
func (db *DB) RecoverRunning(ctx context.Context, now time.Time, fn func(j *Job)) (int, error) {
	total := 0
	// A running job whose record cannot be read (damaged, or missing
	// behind its index entry) is passed over, as claims pass over one: it
	// must not keep every other job running. `idemrun check` reports it.
	damaged := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n := 0
		var bad [][]byte
		err := db.write(func(tx *bolt.Tx) error {
			n, bad = 0, bad[:0]
			b := db.writeBuckets(tx)
			prefix := stateByte[StateRunning]
			var ids [][]byte
			c := b.index.Cursor()
			for k, _ := c.Seek([]byte{prefix}); k != nil && k[0] == prefix && len(ids) < db.opts.MaxBatch; k, _ = c.Next() {
				if !damaged[string(k[9:])] {
					ids = append(ids, append([]byte(nil), k[9:]...))
				}
			}
			for _, id := range ids {
				old, err := b.load(id)
				if err != nil {
					bad = append(bad, id)
					continue
				}
				j := old.clone()
				j.State = StateUnknown
				j.MayHaveEffect = true
				j.UpdatedAt = now
				if j.UnknownSince.IsZero() {
					j.UnknownSince = now
					j.StatusBase = j.StatusQueries
				}
				j.NextRunAt = now
				if fn != nil {
					inCaller(func() { fn(j) })
				}
				if err := b.replace(old, j); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		for _, id := range bad {
			damaged[string(id)] = true
		}
		if n == 0 && len(bad) == 0 {
			return total, nil
		}
	}
}

// Cancel moves a pending job that cannot have had an effect to canceled.
func (db *DB) Cancel(ctx context.Context, id string, now time.Time, actor, note string) (*Job, error) {
	return db.transition(id, func(j *Job) error {
		if j.State != StatePending {
			return &TransitionError{JobID: j.ID, From: j.State, To: StateCanceled, Why: "only pending jobs can be canceled"}
		}
		if j.MayHaveEffect {
			return &TransitionError{JobID: j.ID, From: j.State, To: StateCanceled, Why: "an earlier attempt may have taken effect; it can no longer be canceled"}
		}
		manual(j, now, StateCanceled, actor, note)
		j.Reason = "canceled by " + actorOr(actor)
		return nil
	})
}

// Retry moves a failed job back to pending with the same key, a fresh
// attempt budget and a fresh deadline.
func (db *DB) Retry(ctx context.Context, id string, now time.Time, actor, note string) (*Job, error) {
	return db.transition(id, func(j *Job) error {
		if j.State != StateFailed {
			return &TransitionError{JobID: j.ID, From: j.State, To: StatePending, Why: "only failed jobs can be retried"}
		}
		manual(j, now, StatePending, actor, note)
		j.AttemptBase = j.Attempts
		j.RetryBase = j.Attempts
		j.Deadline = now.Add(j.DeadlineAfter)
		j.NextRunAt = now
		j.Reason = ""
		j.Result = nil
		return nil
	})
}

// Resolve ends a needs_attention job as succeeded or failed on a person's
// word, recording who and why.
func (db *DB) Resolve(ctx context.Context, id string, as State, now time.Time, actor, note string) (*Job, error) {
	if as != StateSucceeded && as != StateFailed {
		return nil, fmt.Errorf("store: resolve as %q: accepted: succeeded, failed", as)
	}
	return db.transition(id, func(j *Job) error {
		if j.State != StateNeedsAttention {
			return &TransitionError{JobID: j.ID, From: j.State, To: as, Why: "only needs_attention jobs are resolved"}
		}
		manual(j, now, as, actor, note)
		j.MayHaveEffect = false
		j.Reason = fmt.Sprintf("resolved as %s by %s: %s", as, actorOr(actor), note)
		return nil
	})
}

func actorOr(a string) string {
	if a == "" {
		return "unknown"
	}
	return a
}

func manual(j *Job, now time.Time, to State, actor, note string) {
	j.AddEvent(Event{Kind: EventManual, Start: now, From: j.State, To: to, Actor: actorOr(actor), Note: note})
	j.State = to
	j.UpdatedAt = now
}

// Sweep deletes up to limit jobs in end states (succeeded, failed,
// canceled) last updated before cutoff, releasing their keys. It walks the
// index, so its cost does not grow with the number of live jobs.
func (db *DB) Sweep(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	return db.SweepKeepKeys(ctx, cutoff, cutoff, limit)
}

// tombLen is the length of a key entry that reserves the key of a deleted
// job: its id and the deletion time.
const tombLen = 16 + 8

// SweepKeepKeys deletes up to limit end-state jobs last updated before
// jobCutoff. A deleted job's key stays reserved (a tombstone: enqueueing it
// again is refused with ErrKeyConflict) until keyCutoff passes the job's
// last update; tombstones older than keyCutoff are released, up to limit
// per call. Both walks use indexes.
func (db *DB) SweepKeepKeys(ctx context.Context, jobCutoff, keyCutoff time.Time, limit int) (int, error) {
	n, _, err := db.SweepKeepKeysCounts(ctx, jobCutoff, keyCutoff, limit)
	return n, err
}

// SweepKeepKeysCounts is SweepKeepKeys that also returns how many key
// reservations it released, so a caller can loop until both are below
// limit.
func (db *DB) SweepKeepKeysCounts(ctx context.Context, jobCutoff, keyCutoff time.Time, limit int) (int, int, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	n, released := 0, 0
	err := db.write(func(tx *bolt.Tx) error {
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
			j  *Job
		}
		var batch []swept
		damaged := 0
	scan:
		for _, s := range []State{StateSucceeded, StateFailed, StateCanceled} {
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
