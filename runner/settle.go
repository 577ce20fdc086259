package runner

import (
	"time"

	"github.com/idemrun/idemrun/store"
)

// settleAt is when a status endpoint's "not found" first proves that
// j's last attempt created nothing: that attempt's start plus the settle
// window (the target host's, or the status host's when longer). Before
// it, a lagging endpoint may not show a create still in progress. The
// zero time when no window applies.
func (r *Runner) settleAt(j *store.Job) time.Time {
	d := r.settleOf(j, store.HostOf(j.Request.URL))
	if j.StatusURL != "" {
		d = max(d, r.settleOf(j, store.ClaimHost(&store.Job{State: store.StateUnknown, StatusURL: j.StatusURL, Request: j.Request})))
	}
	ev := j.LastEvent(store.EventAttempt)
	if d <= 0 || ev == nil {
		return time.Time{}
	}
	return ev.Start.Add(d)
}

// settleOf is j's settle window at host: its policy's (the host's own or
// the default's), else Config.Settle unless j's replays are safe anyway:
// a target that deduplicates by key (a key TTL) needs no window.
func (r *Runner) settleOf(j *store.Job, host string) time.Duration {
	if d := r.traffic.settle(host); d > 0 {
		return d
	}
	if j.KeyTTL > 0 || replaySafe(j) {
		return 0
	}
	return r.cfg.Settle
}

// settle is the settle window of the policy host follows; 0 when
// neither its own nor the default's sets one.
func (t *traffic) settle(host string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.policy(host).Settle
}
