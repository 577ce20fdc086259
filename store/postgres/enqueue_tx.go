package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// EnqueueTx enqueues j inside the caller's transaction tx, so the job
// exists if and only if tx commits: an application writes its own rows
// and the request they call for in one commit (a transactional outbox).
// The key rules are Enqueue's: the same request under the key returns the
// stored job with Existing set; another request, or a key still reserved
// for a deleted job, is refused with a *store.KeyConflictError. A refusal
// leaves tx usable: the statements run under a savepoint, undone on any
// error, and tx can still commit the caller's other writes.
//
// tx may belong to another pool or connection than db's (the
// application's own), on the same database: only tx runs statements,
// with db's schema. The job is announced to listeners when tx commits.
// Run tx at read committed, Postgres's default: under repeatable read a
// concurrent enqueue of the same key is a serialization failure.
func (db *DB) EnqueueTx(ctx context.Context, tx pgx.Tx, j *store.Job) (store.EnqueueResult, error) {
	rs, err := db.EnqueueManyTx(ctx, tx, []*store.Job{j})
	if err != nil {
		return store.EnqueueResult{}, err
	}
	if rs[0].Err != nil {
		return store.EnqueueResult{}, rs[0].Err
	}
	return rs[0], nil
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction tx, as
// EnqueueTx: each job's refusal is in its result, and leaves tx and the
// other jobs as they are. An error undoes this call's writes (only
// theirs) and is returned.
func (db *DB) EnqueueManyTx(ctx context.Context, tx pgx.Tx, jobs []*store.Job) ([]store.EnqueueResult, error) {
	if err := db.usable(ctx); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, fmt.Errorf("store: EnqueueTx without a transaction")
	}
	out, ready, err := prepareAll(len(jobs), func(i int) (*store.Job, error) { return jobs[i], nil })
	if err != nil || len(ready) == 0 {
		return out, err
	}
	fail := func(err error) ([]store.EnqueueResult, error) {
		if !strings.HasPrefix(err.Error(), "store: ") {
			err = fmt.Errorf("store: enqueue in the caller's transaction, %s: %w", db.where, err)
		}
		return nil, db.wrap(err)
	}
	sp, err := tx.Begin(ctx) // a savepoint
	if err != nil {
		return fail(err)
	}
	// A no-op after Commit; its own error is the caller's transaction's.
	defer sp.Rollback(context.WithoutCancel(ctx))
	if err := db.enqueueIn(ctx, sp, out, ready); err != nil {
		return fail(err)
	}
	if anyNew(out) {
		// Not spaced like db's own notifications: the caller commits
		// when it chooses, so nothing could trail it. Postgres sends one
		// of a transaction's identical notifications.
		if _, err := sp.Exec(ctx, notifySQL, db.notify.channel); err != nil {
			return fail(err)
		}
	}
	if err := sp.Commit(ctx); err != nil { // releases the savepoint
		return fail(err)
	}
	return out, nil
}
