package runner

import (
	"errors"
	"sync"

	"github.com/idemrun/idemrun/store"
)

// writeLater queues the outcome of c with the store's FinishLater. The
// job stays the runner's (a slot taken, in held, waited for by Run)
// until the acknowledgement; that one, not the queueing, logs its end and
// calls the hooks. A finish refused by the fence is dropped as write
// drops it; one whose commit failed or is unknown is written again as
// write writes it again, so an outcome that landed meanwhile is refused
// by the fence and a lost one is retried.
func (r *Runner) writeLater(s *slot, c store.Claim, fn store.TransitionFunc) {
	s.queued = true
	wg := s.wg
	r.mu.Lock()
	r.acking++
	r.mu.Unlock()
	// The outcome as fn made it, for a retry: fn runs once, here, so what
	// it records for the caller is not written again from another
	// goroutine.
	var want *store.Job
	keep := func(j *store.Job) error {
		if err := fn(j); err != nil {
			return err
		}
		want = j
		return nil
	}
	err := r.later.FinishClaimLater(c, keep, func(j *store.Job, err error) {
		r.acked(c, fn, want, j, err, wg)
	})
	if err != nil {
		r.acked(c, fn, want, nil, err, wg)
	}
}

// acked ends a job whose queued outcome was acknowledged: written as j,
// or refused or failed with err.
func (r *Runner) acked(c store.Claim, fn store.TransitionFunc, want, j *store.Job, err error, wg *sync.WaitGroup) {
	end := func() {
		r.release(c.Job.ID)
		r.mu.Lock()
		r.acking--
		r.mu.Unlock()
		r.jobDone(wg)
	}
	if err == nil {
		r.written(c.Job, j)
		end()
		return
	}
	var te *store.TransitionError
	if errors.Is(err, store.ErrFenced) || errors.As(err, &te) || r.noteFailed(err) {
		r.writeAgain(c, fn, err) // logs it; no retry
		end()
		return
	}
	again := fn
	if want != nil {
		again = func(j *store.Job) error {
			*j = *want.Clone()
			return nil
		}
	}
	// Retries wait with backoff: not on the store's goroutine.
	go func() {
		r.writeAgain(c, again, err)
		end()
	}()
}
