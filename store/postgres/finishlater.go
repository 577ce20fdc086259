package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/idemrun/idemrun/store"
)

// FinishClaimLater queues the finish of c (see store.FinishLater): it is
// checked now as FinishClaim checks it, then joins the grouped finish
// transactions as a FinishClaim without a next claim does, and done is
// called after that transaction's commit or failure.
func (db *DB) FinishClaimLater(c store.Claim, fn store.TransitionFunc, done func(*store.Job, error)) error {
	ctx := context.Background()
	if err := db.usable(ctx); err != nil {
		return err
	}
	if c.Job == nil {
		return fmt.Errorf("store: a claim without its job")
	}
	j, col, err := finishRecord(c, fn)
	if err != nil {
		return err
	}
	if c.Fence > 1<<63-1 {
		return fmt.Errorf("%w: job %s: claim fence %d", store.ErrFenced, j.ID, c.Fence)
	}
	if !db.later.add() {
		return fmt.Errorf("%w: %s", store.ErrClosed, db.where)
	}
	r := &finishReq{c: c, j: j, col: col, wake: make(chan bool, 1)}
	go func() {
		defer db.later.done()
		db.finishGrouped(ctx, r)
		if r.err != nil {
			done(nil, r.err)
			return
		}
		done(j, nil)
	}()
	return nil
}

// laterFinishes counts queued finishes, so Close can wait for them; once
// it drains, no more are taken.
type laterFinishes struct {
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

// add counts one more queued finish, or reports false once closing.
func (l *laterFinishes) add() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.wg.Add(1)
	return true
}

func (l *laterFinishes) done() { l.wg.Done() }

// drain refuses new finishes and waits for the queued ones.
func (l *laterFinishes) drain() {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.wg.Wait()
}
