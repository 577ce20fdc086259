// What the runner logs at info about the jobs it works: one line when a
// job reaches an end state or needs a person, a summary of those ends
// every SummaryInterval while busy, and what a Run that stops when idle
// waits for.

package runner

import (
	"context"
	"sync"
	"time"

	"github.com/idemrun/idemrun/store"
)

// DefaultSummaryInterval is how often a busy runner logs the jobs that
// ended meanwhile.
const DefaultSummaryInterval = time.Minute

// endCounts counts the jobs that reached each end state since the last
// summary.
type endCounts struct {
	mu sync.Mutex
	n  map[store.State]int
}

func (c *endCounts) add(s store.State) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[store.State]int{}
	}
	c.n[s]++
	c.mu.Unlock()
}

// take returns the counts and starts new ones.
func (c *endCounts) take() map[store.State]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

// endedStates are the states a runner's write ends a job in, as the
// summary lists them.
var endedStates = []store.State{store.StateSucceeded, store.StateFailed, store.StateNeedsAttention}

// logEnd logs a job the runner's write moved from before into an end
// state or needs_attention, and counts it for the summary. The texts are
// the job's own, which the runner stored redacted (Config.Redact).
func (r *Runner) logEnd(before, after *store.Job) {
	if after == nil || (before != nil && before.State == after.State) {
		return
	}
	if !after.State.Terminal() && after.State != store.StateNeedsAttention {
		return
	}
	r.ends.add(after.State)
	attrs := []any{"job", after.ID, "key", after.Key, "state", after.State, "attempts", after.Attempts,
		"since_enqueue", r.cfg.Now().Sub(after.CreatedAt).Round(time.Millisecond)}
	if after.State == store.StateSucceeded {
		r.cfg.Logger.Info("job ended", attrs...)
		return
	}
	attrs = append(attrs, "reason", after.Reason)
	if after.LastError != "" {
		attrs = append(attrs, "last_error", after.LastError)
	}
	r.cfg.Logger.Warn("job ended", attrs...)
}

// summarize logs, every SummaryInterval until ctx ends, how many jobs
// ended in each state since the last line and how many are in flight;
// nothing when none ended and none is in flight.
func (r *Runner) summarize(ctx context.Context) {
	t := time.NewTicker(r.cfg.SummaryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := r.ends.take()
		inflight := r.load()
		if len(n) == 0 && inflight == 0 {
			continue
		}
		attrs := []any{"over", r.cfg.SummaryInterval}
		for _, s := range endedStates {
			attrs = append(attrs, string(s), n[s])
		}
		r.cfg.Logger.Info("jobs ended", append(attrs, "in_flight", inflight)...)
	}
}

// noteIdleWait logs once, for a Run that stops when idle, that it waits
// for jobs due later: how many and when the first is due. It logs again
// only after the runner started work since. Waits shorter than a poll
// interval go unsaid: they are retries' backoff, not a schedule.
func (r *Runner) noteIdleWait(ctx context.Context, st map[store.State]int64) {
	started := r.started.Load()
	if started == r.waitNoted.Load() {
		return
	}
	now := r.cfg.Now()
	var next time.Time
	for _, s := range []store.State{store.StatePending, store.StateUnknown} {
		if t, err := r.store.OldestDue(s); err == nil && !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() || next.Sub(now) < r.cfg.PollInterval {
		return
	}
	r.waitNoted.Store(started)
	r.cfg.Logger.InfoContext(ctx, "waiting for jobs due later before stopping when idle",
		"jobs", st[store.StatePending]+st[store.StateUnknown], "next_due", next.UTC().Format(time.RFC3339), "in", next.Sub(now).Round(time.Second))
}
