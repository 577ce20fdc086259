package store

import (
	"errors"
	"fmt"
	"time"
)

// The manual actions, as transitions every backend applies inside its
// own transaction: the rules are the domain's, not a backend's.

// CancelJob cancels a pending job that cannot have had an effect.
func CancelJob(now time.Time, actor, note string) TransitionFunc {
	return func(j *Job) error {
		if j.State != StatePending {
			return &TransitionError{JobID: j.ID, From: j.State, To: StateCanceled, Why: "only pending jobs can be canceled"}
		}
		if j.MayHaveEffect {
			return &TransitionError{JobID: j.ID, From: j.State, To: StateCanceled, Why: "an earlier attempt may have taken effect; it can no longer be canceled"}
		}
		Manual(j, now, StateCanceled, actor, note)
		j.Reason = "canceled by " + ActorOr(actor)
		return nil
	}
}

// RetryJob moves a failed job back to pending with the same key, a fresh
// attempt budget and a fresh deadline.
func RetryJob(now time.Time, actor, note string) TransitionFunc {
	return func(j *Job) error {
		if j.State != StateFailed {
			return &TransitionError{JobID: j.ID, From: j.State, To: StatePending, Why: "only failed jobs can be retried"}
		}
		Manual(j, now, StatePending, actor, note)
		j.AttemptBase = j.Attempts
		j.RetryBase = j.Attempts
		j.Deadline = now.Add(j.DeadlineAfter)
		j.NextRunAt = now
		j.Reason = ""
		j.Result = nil
		return nil
	}
}

// ResolveJob ends a needs_attention job as succeeded or failed on a
// person's word, recording who and why. An as other than those is
// refused before any job is read.
func ResolveJob(as State, now time.Time, actor, note string) (TransitionFunc, error) {
	if as != StateSucceeded && as != StateFailed {
		return nil, fmt.Errorf("store: resolve as %q: accepted: succeeded, failed", as)
	}
	return func(j *Job) error {
		if j.State != StateNeedsAttention {
			return &TransitionError{JobID: j.ID, From: j.State, To: as, Why: "only needs_attention jobs are resolved"}
		}
		Manual(j, now, as, actor, note)
		j.MayHaveEffect = false
		j.Reason = fmt.Sprintf("resolved as %s by %s: %s", as, ActorOr(actor), note)
		return nil
	}, nil
}

// CheckNew refuses a job to enqueue that lacks what every stored job has;
// the backend checks its id's form.
func CheckNew(j *Job) error {
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
	return nil
}
