package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
)

// ClaimDue claims due jobs (see store.Work). Records are read, changed and
// encoded in a read transaction in the caller's goroutine; the writer then
// commits each claim only if the record is still byte for byte what was
// read (compare and swap), so concurrent claimers never claim a job twice.
// Jobs another ClaimDue of this handle is claiming are passed over (as
// SKIP LOCKED does), so overlapping claim rounds do not collide.
func (db *DB) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	cands, err := db.prepareClaims(ctx, req)
	defer db.unmark(cands)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	var out []store.Claim
	err = db.write(func(tx *bbolt.Tx) error {
		out = out[:0]
		if req.Owner != "" && !db.alive(req.Owner, req.Now) {
			// Checked again inside the write: a Rescue may have dropped
			// the lease since prepareClaims looked.
			return nothingWritten(fmt.Errorf("%w: runner %s claims without a live lease", store.ErrLeaseLost, req.Owner))
		}
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

// candidate is a due job read and prepared for a claim that is not
// written yet. Writing it succeeds only if the stored record is still
// exactly the one read.
type candidate struct {
	id, old, rec []byte
	ival         []byte // the claimed job's index value
	sid          string // id as the index names it: the claiming mark
	job          *store.Job
}

// claimIn writes the candidate's claim if the stored record is still the
// one it was prepared from, and returns nil otherwise (another claimer or
// a change won). Its errors are fatal.
func (c *candidate) claimIn(b buckets) (*store.Claim, error) {
	v := b.jobs.Get(c.id)
	if !bytes.Equal(v, c.old) {
		return nil, nil
	}
	oh, _ := parseHead(v)
	if err := b.replaceRaw(c.id, oh, c.rec, c.ival); err != nil {
		return nil, err
	}
	cl := store.ClaimOf(c.job)
	return &cl, nil
}

// mark records id as being claimed by a ClaimDue of this handle, and
// reports false when one already is.
func (db *DB) mark(id string) bool {
	_, taken := db.claiming.LoadOrStore(id, struct{}{})
	return !taken
}

// unmark ends the marks of cands.
func (db *DB) unmark(cands []candidate) {
	for i := range cands {
		db.claiming.Delete(cands[i].sid)
	}
}

// marked reports whether a ClaimDue of this handle is claiming id.
func (db *DB) marked(id string) bool {
	_, taken := db.claiming.Load(id)
	return taken
}

// prepareClaims reads up to req.Limit due jobs, oldest next_run_at first,
// passing over those another claim round is claiming, marks them and
// prepares their claims without writing anything. The reading and
// encoding happen in the caller's goroutine, not the writer's. The
// candidates returned are marked even with an error: the caller unmarks
// them.
func (db *DB) prepareClaims(ctx context.Context, req store.ClaimRequest) ([]candidate, error) {
	s := req.State
	if s != store.StatePending && s != store.StateUnknown {
		return nil, fmt.Errorf("store: only pending or unknown jobs are claimed, not %s", s)
	}
	if req.Limit <= 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed {
		return nil, store.ErrClosed
	}
	if req.Owner != "" && !db.alive(req.Owner, req.Now) {
		return nil, fmt.Errorf("%w: runner %s claims without a live lease", store.ErrLeaseLost, req.Owner)
	}
	var cands []candidate
	cur := "" // marked and not yet a candidate
	defer func() {
		if cur != "" {
			db.claiming.Delete(cur) // a panic in Prepare or in bbolt
		}
	}()
	err := db.view(func(tx *bbolt.Tx) error {
		b := bucketsOf(tx)
		prefix := stateByte[s]
		bound := dueBound(s, req.Now)
		f := newHostFilter(req.SkipHosts, req.Admit)
		var ferr error
		// consider makes the entry k, v a candidate if it may be claimed,
		// and reports whether the claim goes on.
		consider := func(k, v []byte) bool {
			id := append([]byte(nil), k[9:]...)
			sid := uuid.UUID(id).String()
			if !db.mark(sid) {
				return true
			}
			cur = sid
			rv := b.jobs.Get(id)
			var j *store.Job
			if rv != nil {
				j, _ = DecodeRecord(rv)
			}
			if j == nil {
				db.claiming.Delete(sid)
				cur = ""
				return true // a damaged index entry or record must not stop the other jobs; Check reports it
			}
			var host []byte
			if f != nil {
				_, tagged := entryHost(v)
				host = hostOf(v, j)
				if (!tagged && f.skips(host)) || !f.admits(host) {
					db.claiming.Delete(sid)
					cur = ""
					return true
				}
			}
			var ival []byte
			if s == store.StateUnknown {
				// A claimed unknown job stays due, under the same host.
				if host == nil {
					host = hostOf(v, j)
				}
				ival = hostValue(host)
			}
			rec, err := claimed(j, s, req.Now, req.Owner, req.Prepare)
			if err != nil {
				db.claiming.Delete(sid)
				cur = ""
				ferr = err
				return false
			}
			cands = append(cands, candidate{id: id, old: append([]byte(nil), rv...), rec: rec, ival: ival, sid: sid, job: j})
			cur = ""
			return len(cands) < req.Limit
		}
		passed := 0 // entries passed over for their host
		c := b.index.Cursor()
		for k, v := c.Seek([]byte{prefix}); k != nil && k[0] == prefix && len(cands) < req.Limit; k, v = c.Next() {
			if bytes.Compare(k[:9], bound) > 0 {
				break
			}
			h, tagged := entryHost(v)
			if f != nil && tagged && f.skips(h) {
				passed++
				if passed >= byHostAfter && b.hostdue != nil {
					// Mostly jobs of hosts passed over so far: the rest is
					// found host by host, those hosts' entries unread.
					if err := dueByHost(b, prefix, k, bound, f.skips, consider); err != nil {
						return err
					}
					return ferr
				}
				continue
			}
			if !consider(k, v) {
				break
			}
		}
		return ferr
	})
	return cands, err
}

// claimed turns a due job of state s into its claimed form (a new fence
// and owner; pending becomes running with one more attempt, unknown counts
// one more status query), lets prepare add to it and encodes it.
func claimed(j *store.Job, s store.State, now time.Time, owner string, prepare store.ClaimFunc) ([]byte, error) {
	j.Fence++
	j.Owner = owner
	j.UpdatedAt = now
	if s == store.StatePending {
		j.State = store.StateRunning
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
	if j.Owner != owner || j.Fence == 0 {
		return nil, fmt.Errorf("store: job %s: a claim's prepare must not change its owner or fence", j.ID)
	}
	return encodeJob(j)
}

// finished is a finish prepared outside the writer: the changed job, its
// id bytes, its record and its index value.
type finished struct {
	job           *store.Job
	id, rec, ival []byte
}

// finishRecord applies fn to a copy of the claimed job, checks the change
// and encodes it, all outside the writer.
func finishRecord(c store.Claim, fn store.TransitionFunc) (finished, error) {
	old := c.Job
	j := old.Clone()
	if err := fn(j); err != nil {
		return finished{}, err
	}
	if old.State != store.StateRunning && old.State != store.StateUnknown {
		return finished{}, &store.TransitionError{JobID: old.ID, From: old.State, To: j.State, Why: "only a claimed job (running, or unknown under a status query) is finished by its claim"}
	}
	if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence || j.Owner != old.Owner {
		return finished{}, fmt.Errorf("store: job %s: id, key, fence and owner never change in a finish", old.ID)
	}
	if !store.SameRequest(old, j) {
		return finished{}, fmt.Errorf("store: job %s: %w", old.ID, errRequestChanged)
	}
	if j.State != old.State && !store.Legal(old.State, j.State) {
		return finished{}, &store.TransitionError{JobID: j.ID, From: old.State, To: j.State}
	}
	rec, err := encodeJob(j)
	if err != nil {
		return finished{}, err
	}
	id, err := idBytes(j.ID)
	if err != nil {
		return finished{}, err
	}
	return finished{job: j, id: id, rec: rec, ival: indexValue(j)}, nil
}

// finishIn writes a finish's record if the stored job is still held by
// the claim. The record's head tells without decoding it: every claim and
// every rescue raises the fence, so an equal fence means the record the
// claim wrote, whose attempt and owner are those of c.Job (a claim whose
// own attempt or owner differ from its job's holds nothing); the state
// and index time being the claim's own mean no other write of the claim
// came first.
func finishIn(b buckets, c store.Claim, f finished) error {
	id := f.id
	v := b.jobs.Get(id)
	oh, ok := parseHead(v)
	if v == nil {
		return fmt.Errorf("%w: job %s", store.ErrNotFound, c.Job.ID)
	}
	if !ok || c.Fenced(c.Job) || oh.fence != c.Fence || oh.state != stateByte[c.Job.State] || binary.BigEndian.Uint64(oh.itime[:]) != timeKey(indexTime(c.Job)) {
		return fmt.Errorf("%w: job %s changed since claim %d (attempt %d, runner %s)", store.ErrFenced, c.Job.ID, c.Fence, c.Attempt, c.Owner)
	}
	return b.replaceRaw(id, oh, f.rec, f.ival)
}

// nextScan bounds the index entries one chained claim looks at (passed
// over, or damaged) before it gives up and leaves the work to ClaimDue.
const nextScan = 64

// FinishClaim writes the outcome of a claim (see store.Work) without
// reading the job again: fn changes a copy of the claimed job, which is
// checked and encoded in the caller's goroutine; the writer commits it
// only if the job is still held by the claim. With next, the claim of the
// due job with the earliest next_run_at is in the same transaction: a
// worker's outcome write and its next claim cost one commit wait, not two.
func (db *DB) FinishClaim(ctx context.Context, c store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if c.Job == nil {
		return nil, nil, fmt.Errorf("store: a claim without its job")
	}
	f, err := finishRecord(c, fn)
	if err != nil {
		return nil, nil, err
	}
	var nc *store.Claim
	err = db.write(func(tx *bbolt.Tx) error {
		nc = nil // the op may run again alone if its batch fails
		b := db.writeBuckets(tx)
		if err := finishIn(b, c, f); err != nil || next == nil {
			return err
		}
		var err error
		nc, err = db.claimNextIn(b, *next)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return f.job, nc, nil
}

// claimNextIn claims, inside a write transaction, the due pending or
// unknown job with the earliest next_run_at that no claim round of this
// handle is claiming and next's host filter lets through. Only bbolt write
// errors (fatal) are returned: the finish before it is already written.
func (db *DB) claimNextIn(b buckets, next store.NextClaim) (*store.Claim, error) {
	type lane struct {
		s      store.State
		prefix byte
		bound  []byte
		c      *bbolt.Cursor
		k, v   []byte // the lane's first acceptable due entry, nil if none
	}
	if next.Owner != "" && !db.alive(next.Owner, next.Now) {
		return nil, nil // the runner lost its lease: its finish stands, it claims nothing more
	}
	f := newHostFilter(next.SkipHosts, next.Admit)
	lanes := [2]lane{{s: store.StatePending}, {s: store.StateUnknown}}
	budget := nextScan
	// advance moves a lane to its first due entry at or after k that no
	// claim round is claiming and whose host, when its entry names it, is
	// not passed over.
	advance := func(l *lane, k, v []byte) {
		for ; k != nil && k[0] == l.prefix && budget > 0; k, v = l.c.Next() {
			if bytes.Compare(k[:9], l.bound) > 0 {
				break
			}
			h, tagged := entryHost(v)
			if !db.marked(uuid.UUID(k[9:]).String()) && (f == nil || !tagged || !f.skips(h)) {
				l.k, l.v = k, v
				return
			}
			budget--
		}
		l.k, l.v = nil, nil
	}
	for i := range lanes {
		l := &lanes[i]
		l.prefix = stateByte[l.s]
		l.bound = dueBound(l.s, next.Now)
		l.c = b.index.Cursor()
		k, v := l.c.Seek([]byte{l.prefix})
		advance(l, k, v)
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
		var j *store.Job
		if v != nil {
			j, _ = DecodeRecord(v)
		}
		var host []byte
		if j != nil && (f != nil || l.s == store.StateUnknown) {
			host = hostOf(l.v, j)
		}
		if j == nil || (f != nil && (f.skips(host) || !f.admits(host))) {
			// A damaged index entry or record (Check reports it), or a
			// host passed over: the claim moves on.
			budget--
			k, kv := l.c.Next()
			advance(l, k, kv)
			continue
		}
		prepare := next.Pending
		var ival []byte
		if l.s == store.StateUnknown {
			prepare = next.Unknown
			ival = hostValue(host)
		}
		rec, err := claimed(j, l.s, next.Now, next.Owner, prepare)
		if err != nil {
			// The finish is already written, so this must not refuse the
			// op: leave the job to ClaimDue, which reports the error.
			return nil, nil
		}
		oh, _ := parseHead(v)
		if err := b.replaceRaw(id, oh, rec, ival); err != nil {
			return nil, err
		}
		cl := store.ClaimOf(j)
		return &cl, nil
	}
	return nil, nil
}
