package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// Enqueue stores a new pending job (see store.Jobs). A job whose key holds
// the same request returns the stored job with Existing set; another
// request under the key, or under a key still reserved for a deleted job,
// is refused with a *store.KeyConflictError.
func (db *DB) Enqueue(ctx context.Context, j *store.Job) (store.EnqueueResult, error) {
	rs, err := db.EnqueueMany(ctx, []*store.Job{j})
	if err != nil {
		return store.EnqueueResult{}, err
	}
	if rs[0].Err != nil {
		return store.EnqueueResult{}, rs[0].Err
	}
	return rs[0], nil
}

// EnqueueMany stores jobs in one transaction, each as Enqueue would; a
// refusal is in its job's result.
func (db *DB) EnqueueMany(ctx context.Context, jobs []*store.Job) ([]store.EnqueueResult, error) {
	return db.EnqueueManyFunc(ctx, len(jobs), func(i int) (*store.Job, error) { return jobs[i], nil })
}

// manyChunk is how many jobs EnqueueManyFunc sends to the server at once,
// in one round trip.
const manyChunk = 256

// EnqueueManyFunc is EnqueueMany over n jobs made by build, called once
// for each i in order; an error from build is job i's Err. All the jobs
// are stored in one transaction, inserted in the order of their keys
// (stably: the first of two jobs with one key is the one stored): two
// batches that share keys then take the keys' locks in one order, and
// cannot deadlock each other.
func (db *DB) EnqueueManyFunc(ctx context.Context, n int, build func(i int) (*store.Job, error)) ([]store.EnqueueResult, error) {
	if err := db.usable(ctx); err != nil {
		return nil, err
	}
	out, ready, err := prepareAll(n, build)
	if err != nil || len(ready) == 0 {
		return out, err
	}
	held := false
	err = db.tx(ctx, func(tx pgx.Tx) error {
		held = false
		if err := db.enqueueIn(ctx, tx, out, ready); err != nil {
			return err
		}
		if !anyNew(out) {
			return nil
		}
		var err error
		held, err = db.notify.inTx(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if held {
		db.notify.trail()
	}
	return out, nil
}

// prepareAll builds, checks and encodes n jobs: the results with the
// refusals filled in, and the jobs to insert in the order of their keys
// (stably: the first of two jobs with one key is the one stored).
func prepareAll(n int, build func(i int) (*store.Job, error)) ([]store.EnqueueResult, []pendingJob, error) {
	if n < 0 {
		return nil, nil, fmt.Errorf("store: EnqueueManyFunc of %d jobs; want 0 or more", n)
	}
	if n == 0 {
		return nil, nil, nil
	}
	out := make([]store.EnqueueResult, n)
	var ready []pendingJob
	for i := range n {
		j, c, err := prepare(i, n, build)
		if err != nil {
			out[i].Err = err
			continue
		}
		ready = append(ready, pendingJob{i: i, job: j, c: c})
	}
	slices.SortStableFunc(ready, func(a, b pendingJob) int { return strings.Compare(a.job.Key, b.job.Key) })
	return out, ready, nil
}

// enqueueIn inserts the ready jobs in tx, a chunk per round trip, and
// fills their results.
func (db *DB) enqueueIn(ctx context.Context, tx pgx.Tx, out []store.EnqueueResult, ready []pendingJob) error {
	for lo := 0; lo < len(ready); lo += manyChunk {
		if err := db.enqueueChunk(ctx, tx, out, ready[lo:min(lo+manyChunk, len(ready))]); err != nil {
			return err
		}
	}
	return nil
}

// pendingJob is job i, checked and encoded, on its way into the table.
type pendingJob struct {
	i   int
	job *store.Job
	c   cols
}

// enqueueChunk inserts jobs and fills their results. An insert that finds
// the key (or the id) taken inserts nothing; the jobs inserted are then
// checked against the key reservations, which a sweep may have made while
// the insert waited for it.
func (db *DB) enqueueChunk(ctx context.Context, tx pgx.Tx, out []store.EnqueueResult, ready []pendingJob) error {
	b := &pgx.Batch{}
	for _, p := range ready {
		b.Queue(db.q.insert, p.c.insertArgs()...)
	}
	br := tx.SendBatch(ctx, b)
	inserted := make([]bool, len(ready))
	for k := range ready {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		inserted[k] = tag.RowsAffected() == 1
	}
	if err := br.Close(); err != nil {
		return err
	}

	// Inserted under a key a sweep reserved meanwhile: take it back out
	// before any job of the chunk is compared with it.
	var keys []string
	for k, p := range ready {
		if inserted[k] {
			keys = append(keys, p.job.Key)
		}
	}
	tombs := map[string]*store.KeyConflictError{}
	if len(keys) > 0 {
		rows, err := tx.Query(ctx, db.q.tombsByKeys, keys)
		if err != nil {
			return err
		}
		for rows.Next() {
			var key, id string
			var upd int64
			if err := rows.Scan(&key, &id, &upd); err != nil {
				return err
			}
			tombs[key] = &store.KeyConflictError{Key: key, JobID: id, Deleted: fromNanos(upd)}
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	var back []string
	for k, p := range ready {
		if !inserted[k] {
			continue
		}
		if kc := tombs[p.job.Key]; kc != nil {
			back = append(back, p.job.ID)
			out[p.i].Err = kc
			continue
		}
		out[p.i].Job = p.job
	}
	if len(back) > 0 {
		if _, err := tx.Exec(ctx, db.q.deleteJobs, back); err != nil {
			return err
		}
	}
	for k, p := range ready {
		if inserted[k] {
			continue
		}
		res, err := db.enqueueTaken(ctx, tx, p)
		if err != nil {
			return err
		}
		out[p.i] = res
	}
	return nil
}

// prepare builds job i of n, checks it and encodes it.
func prepare(i, n int, build func(i int) (*store.Job, error)) (*store.Job, cols, error) {
	j, err := build(i)
	switch {
	case err != nil:
		return nil, cols{}, err
	case j == nil:
		return nil, cols{}, fmt.Errorf("store: job %d of %d is nil", i, n)
	}
	nj := j.Clone()
	if err := checkNew(nj); err != nil {
		return nil, cols{}, err
	}
	c, err := colsOf(nj)
	if err != nil {
		return nil, cols{}, err
	}
	return nj, c, nil
}

// enqueueTaken finds what holds the key or id of a job whose insert did
// nothing: the job under its key (the same request, or a conflict), a key
// reservation, or another job with its id. A holder gone since (swept)
// leaves the key free, and the insert is tried again.
func (db *DB) enqueueTaken(ctx context.Context, tx pgx.Tx, p pendingJob) (store.EnqueueResult, error) {
	j := p.job
	for try := 0; try < 3; try++ {
		var rec []byte
		err := tx.QueryRow(ctx, db.q.jobByKey, j.Key).Scan(&rec)
		if err == nil {
			ex, err := decodeJob(rec)
			if err != nil {
				return store.EnqueueResult{Err: fmt.Errorf("store: the job holding key %q: %w", j.Key, err)}, nil
			}
			// The key format is part of what is sent (Idempotency-Key:
			// k or "k"), so a request asking for another is not the
			// stored job.
			if ex.Fingerprint != j.Fingerprint || store.KeyFormatOf(ex) != store.KeyFormatOf(j) {
				return store.EnqueueResult{Err: &store.KeyConflictError{Key: j.Key, JobID: ex.ID}}, nil
			}
			return store.EnqueueResult{Job: ex, Existing: true}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.EnqueueResult{}, err
		}
		var id string
		var upd int64
		err = tx.QueryRow(ctx, db.q.tombByKey, j.Key).Scan(&id, &upd)
		if err == nil {
			return store.EnqueueResult{Err: &store.KeyConflictError{Key: j.Key, JobID: id, Deleted: fromNanos(upd)}}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.EnqueueResult{}, err
		}
		var idTaken bool
		if err := tx.QueryRow(ctx, db.q.jobExists, j.ID).Scan(&idTaken); err != nil {
			return store.EnqueueResult{}, err
		}
		if idTaken {
			return store.EnqueueResult{Err: fmt.Errorf("store: job id %s is already used by another job; give each job a new id (store.NewID)", j.ID)}, nil
		}
		tag, err := tx.Exec(ctx, db.q.insert, p.c.insertArgs()...)
		if err != nil {
			return store.EnqueueResult{}, err
		}
		if tag.RowsAffected() == 1 {
			var upd int64
			err := tx.QueryRow(ctx, db.q.tombByKey, j.Key).Scan(&id, &upd)
			if err == nil {
				if _, err := tx.Exec(ctx, db.q.deleteJobs, []string{j.ID}); err != nil {
					return store.EnqueueResult{}, err
				}
				return store.EnqueueResult{Err: &store.KeyConflictError{Key: j.Key, JobID: id, Deleted: fromNanos(upd)}}, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return store.EnqueueResult{}, err
			}
			return store.EnqueueResult{Job: j}, nil
		}
	}
	return store.EnqueueResult{}, fmt.Errorf("store: enqueue of key %q: its holder kept changing; try again", j.Key)
}

// anyNew reports whether results hold a job stored by this enqueue: work
// to announce.
func anyNew(results []store.EnqueueResult) bool {
	for _, r := range results {
		if r.Err == nil && r.Job != nil && !r.Existing {
			return true
		}
	}
	return false
}
