package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// transition is the one shape of every manual change: the job is locked
// and read, fn changes a copy, the change is checked against the
// transition table and the rules of what never changes, and written. A
// change that makes the job pending is announced to listeners.
func (db *DB) transition(ctx context.Context, id string, fn store.TransitionFunc) (*store.Job, error) {
	if err := db.usable(ctx); err != nil {
		return nil, err
	}
	sid, err := jobID(id)
	if err != nil {
		return nil, err
	}
	var out *store.Job
	held := false
	err = db.tx(ctx, func(tx pgx.Tx) error {
		held = false
		var rec []byte
		err := tx.QueryRow(ctx, db.q.jobByIDLocked, sid).Scan(&rec)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", store.ErrNotFound, sid)
		}
		if err != nil {
			return err
		}
		old, err := decodeJob(rec)
		if err != nil {
			return err
		}
		j, err := changed(old, fn)
		if err != nil {
			return err
		}
		c, err := colsOf(j)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, db.q.update, c.updateArgs()...); err != nil {
			return err
		}
		out = j
		if j.State == store.StatePending && old.State != store.StatePending {
			held, err = db.notify.inTx(ctx, tx)
		}
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

// changed returns the copy of old that fn changed, checked against the
// transition table and the rules of what never changes.
func changed(old *store.Job, fn store.TransitionFunc) (*store.Job, error) {
	j := old.Clone()
	if err := fn(j); err != nil {
		return nil, err
	}
	if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence {
		// Only a claim moves the fence; a change that rewound it would
		// let a stale claim's write pass its fence check again.
		return nil, fmt.Errorf("store: job %s: id, key and fence never change in a transition", old.ID)
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
	return j, nil
}

// Cancel moves a pending job that cannot have had an effect to canceled.
func (db *DB) Cancel(ctx context.Context, id string, now time.Time, actor, note string) (*store.Job, error) {
	return db.transition(ctx, id, store.CancelJob(now, actor, note))
}

// Retry moves a failed job back to pending with the same key, a fresh
// attempt budget and a fresh deadline, and announces it to listeners
// (Wakeups).
func (db *DB) Retry(ctx context.Context, id string, now time.Time, actor, note string) (*store.Job, error) {
	return db.transition(ctx, id, store.RetryJob(now, actor, note))
}

// Resolve ends a needs_attention job as succeeded or failed on a person's
// word, recording who and why.
func (db *DB) Resolve(ctx context.Context, id string, as store.State, now time.Time, actor, note string) (*store.Job, error) {
	fn, err := store.ResolveJob(as, now, actor, note)
	if err != nil {
		return nil, err
	}
	return db.transition(ctx, id, fn)
}
