// The runner's lease: registered at Run, renewed by a heartbeat, ended
// at exit; and the rescue of the jobs of runners whose lease expired.

package runner

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/store"
)

func lastOpenAttempt(j *store.Job) *store.Event {
	ev := j.LastEvent(store.EventAttempt)
	if ev != nil && ev.End.IsZero() {
		return ev
	}
	return nil
}

// Recover moves the running jobs of runners whose lease expired (a crash,
// a lost lease; on a bbolt file, every earlier process) to unknown, their
// first status query spread over StartupSpread after the quiet period.
// The jobs of live runners are not touched. Run calls it first and then
// every third of LeaseTTL; it is exported for tools that only want the
// recovery.
func (r *Runner) Recover(ctx context.Context) (int, error) {
	return r.recoverAt(ctx, r.cfg.Now())
}

// recoverAt is Recover judging leases at now.
func (r *Runner) recoverAt(ctx context.Context, now time.Time) (int, error) {
	n, err := r.store.Rescue(ctx, now, func(j *store.Job) {
		r.recordRecovery(j, now, fmt.Sprintf("attempt %d was in flight when its runner stopped; it may have reached the target", j.Attempts), "runner stopped while in flight")
	})
	if n > 0 {
		r.cfg.Logger.Info("recovered jobs left running", "count", n)
	}
	return n, err
}

// ID is the runner instance's id: the owner its claims record.
func (r *Runner) ID() string { return r.cfg.ID }

// register starts the runner's lease and keeps it alive until the
// returned stop is called (which ends the lease), rescuing the jobs of
// expired runners at each heartbeat. A heartbeat refused with
// store.ErrLeaseLost stops the runner (noteFailed); other heartbeat
// errors are logged and tried again soon, and while the lease goes
// unrenewed past leaseFresh's bound the runner claims nothing.
func (r *Runner) register(ctx context.Context) (stop func(), err error) {
	info := store.RunnerInfo{ID: r.cfg.ID, Workers: r.cfg.Workers, Host: hostname(), PID: os.Getpid()}
	now, err := r.startLease(ctx, info)
	if err != nil {
		return nil, err
	}
	r.renewedAt.Store(now.UnixNano())
	quit := make(chan struct{})
	done := make(chan struct{})
	var adoptions sync.WaitGroup
	var adopting atomic.Bool
	go func() {
		defer close(done)
		every, again := r.cfg.LeaseTTL/3, r.cfg.LeaseTTL/12
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			now := r.cfg.Now()
			err := r.store.Heartbeat(context.Background(), r.cfg.ID, now, r.cfg.LeaseTTL)
			if r.noteFailed(err) {
				r.cfg.Logger.Error("runner lease lost; claiming stops", "runner", r.cfg.ID, "err", err)
				r.Notify()
				return
			}
			if err != nil {
				r.cfg.Logger.Error("lease heartbeat failed; will try again", "runner", r.cfg.ID, "err", err, "in", again)
				t.Reset(again)
				continue
			}
			r.renewedAt.Store(now.UnixNano())
			r.publishTraffic(now)
			if r.stale.Swap(false) {
				r.cfg.Logger.Info("runner lease renewed; claiming goes on", "runner", r.cfg.ID)
				r.Notify()
			}
			t.Reset(every)
			// The rescue judges leases at the reading this beat renewed the
			// runner's own lease at, so it never takes the runner's own jobs.
			if _, err := r.recoverAt(context.Background(), now); err != nil {
				r.cfg.Logger.Error("recovery of expired runners' jobs failed; will try again", "err", err)
			}
			if r.orphans.Load() && !adopting.Swap(true) {
				// Apart from the beats: adoption waits for the claims in
				// flight, which may wait on a store that is slow to answer.
				adoptions.Add(1)
				go func() {
					defer adoptions.Done()
					defer adopting.Store(false)
					if _, err := r.adoptOrphans(context.Background()); err != nil {
						r.cfg.Logger.Error("adopting jobs whose claim's commit was not confirmed failed; will try again", "err", err)
					}
				}()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		adoptions.Wait()
		if err := r.store.Deregister(context.Background(), r.cfg.ID); err != nil {
			r.cfg.Logger.Error("ending the runner lease failed", "runner", r.cfg.ID, "err", err)
		}
	}, nil
}

// leaseFresh reports whether the lease was renewed recently enough at now
// for a new attempt to start: within two thirds of LeaseTTL, one missed
// beat. A runner cut off from its store would otherwise go on claiming
// (and sending) up to the moment its lease expires, while another runner
// is about to rescue those jobs and query their status.
func (r *Runner) leaseFresh(now time.Time) bool {
	return now.Sub(time.Unix(0, r.renewedAt.Load())) < r.cfg.LeaseTTL*2/3
}

// hostname is this machine's name, or "" when it cannot be read.
func hostname() string {
	h, _ := os.Hostname()
	return h
}
