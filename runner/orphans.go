// Orphaned claims: claims that committed while the runner heard an error.

package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrun/idemrun/store"
)

// A claim whose commit outcome is unknown (store.ErrCommitUnknown: the
// connection to the database ended during it) may have committed: its
// jobs are then running under this runner's live lease, and no rescue
// takes them while the runner lives. The runner never sent them (it sends
// only after a claim returns), so they are its orphans: adoptOrphans
// finds them and ends their open attempt as a recovery does, into
// unknown. A status query then decides, which costs one query and never
// a duplicate.
//
// Claims and adoption exclude each other (claimGate): a claim holds the
// gate for reading from its call until its jobs are in held, and adoption
// holds it for writing, so a job claimed a moment ago is never taken for
// an orphan.

// noteClaimErr flags a claim or chained-claim error that may leave
// orphans, for the next heartbeat to adopt them.
func (r *Runner) noteClaimErr(err error) {
	if errors.Is(err, store.ErrCommitUnknown) {
		r.orphans.Store(true)
	}
}

// hold records that this runner works the job now; release, that it no
// longer does.
func (r *Runner) hold(id string) {
	r.mu.Lock()
	r.held[id] = struct{}{}
	r.mu.Unlock()
}

func (r *Runner) release(id string) {
	r.mu.Lock()
	delete(r.held, id)
	r.mu.Unlock()
}

func (r *Runner) holds(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[id]
	return ok
}

// adoptOrphans moves this runner's running jobs that no worker of it
// works into unknown, when a claim's outcome was unknown since the last
// adoption, and returns how many it moved.
func (r *Runner) adoptOrphans(ctx context.Context) (int, error) {
	if !r.orphans.Swap(false) {
		return 0, nil
	}
	r.claimGate.Lock()
	defer r.claimGate.Unlock()
	n := 0
	cursor := ""
	for range maxOrphanPages {
		page, err := r.store.List(store.ListFilter{States: []store.State{store.StateRunning}, Limit: store.MaxListLimit, Cursor: cursor})
		if err != nil {
			r.orphans.Store(true) // tried again at the next beat
			return n, err
		}
		for _, j := range page.Jobs {
			if j.Owner != r.cfg.ID || r.holds(j.ID) {
				continue
			}
			now := r.cfg.Now()
			_, _, err := r.store.FinishClaim(ctx, store.ClaimOf(j), func(j *store.Job) error {
				j.State = store.StateUnknown
				j.MayHaveEffect = true
				j.UpdatedAt = now
				if j.UnknownSince.IsZero() {
					j.UnknownSince = now
					j.StatusBase = j.StatusQueries
				}
				r.recordRecovery(j, now, fmt.Sprintf("attempt %d was claimed but its claim's commit was not confirmed, so it was not sent; it is checked as if it may have been", j.Attempts), "claim commit not confirmed")
				return nil
			}, nil)
			switch {
			case err == nil:
				n++
			case errors.Is(err, store.ErrFenced):
				// Changed since it was listed: no longer an orphan of ours.
			default:
				r.orphans.Store(true)
				return n, err
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if n > 0 {
		r.cfg.Logger.Info("adopted jobs whose claim's commit was not confirmed", "count", n)
	}
	return n, nil
}

// maxOrphanPages bounds one adoption's walk over the running jobs.
const maxOrphanPages = 100

// recordRecovery records in j, just moved from running to unknown at
// now, why: its open attempt ends, and its first status query comes
// after the quiet period, spread over StartupSpread. A rescue records a
// job whose runner stopped so, and adoption an orphan.
func (r *Runner) recordRecovery(j *store.Job, now time.Time, why, attemptErr string) {
	j.NextRunAt = now.Add(r.cfg.QuietPeriod + r.jitter(r.cfg.StartupSpread))
	j.LastClass = string(ClassUnknown)
	j.LastError = why
	j.AddEvent(store.Event{Kind: store.EventRecovery, N: j.Attempts, Start: now, From: store.StateRunning, To: store.StateUnknown,
		Detail: why})
	if ev := lastOpenAttempt(j); ev != nil {
		ev.End = now
		ev.Class = string(ClassUnknown)
		ev.Error = attemptErr
	}
}
