package runner

import (
	"context"
	"errors"
	"time"

	"github.com/idemrun/idemrun/store"
)

// registerWait bounds how long a starting runner keeps trying to
// register while the database is unreachable: long enough to ride out a
// restart or a failover, short enough that a database that stays away
// ends Run with its error.
const registerWait = time.Minute

// startLease registers the runner's lease, trying again while the store
// is unavailable (store.ErrUnavailable) or the registration's outcome is
// unknown (store.ErrCommitUnknown). After an unknown outcome the lease
// may exist already, so the next try renews it, and registers only when
// the renewal says there is none.
func (r *Runner) startLease(ctx context.Context, info store.RunnerInfo) (time.Time, error) {
	deadline := time.Now().Add(registerWait)
	wait := r.cfg.LeaseTTL / 12
	maybeStored := false
	for {
		now := r.cfg.Now()
		var err error
		if maybeStored {
			err = r.store.Heartbeat(ctx, info.ID, now, r.cfg.LeaseTTL)
			if errors.Is(err, store.ErrLeaseLost) {
				maybeStored = false
				err = r.store.Register(ctx, info, now, r.cfg.LeaseTTL)
			}
		} else {
			err = r.store.Register(ctx, info, now, r.cfg.LeaseTTL)
		}
		if err == nil {
			return now, nil
		}
		if errors.Is(err, store.ErrCommitUnknown) {
			maybeStored = true
		}
		transient := errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown)
		if !transient || time.Now().Add(wait).After(deadline) {
			return time.Time{}, err
		}
		r.cfg.Logger.Error("runner registration failed; will try again", "runner", info.ID, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, r.cfg.LeaseTTL/3)
	}
}
