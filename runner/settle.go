package runner

import (
	"time"

	"github.com/idemrun/idemrun/store"
)

// settleAt is when a status endpoint's "not found" first proves that
// j's last attempt created nothing: that attempt's start plus the settle
// window of the host's policy (the target's, or the status host's when
// longer). Before it, a lagging endpoint may not show a create still in
// progress. The zero time when no window applies.
func (r *Runner) settleAt(j *store.Job) time.Time {
	d := r.traffic.settle(store.HostOf(j.Request.URL))
	if j.StatusURL != "" {
		d = max(d, r.traffic.settle(store.ClaimHost(&store.Job{State: store.StateUnknown, StatusURL: j.StatusURL, Request: j.Request})))
	}
	ev := j.LastEvent(store.EventAttempt)
	if d <= 0 || ev == nil {
		return time.Time{}
	}
	return ev.Start.Add(d)
}

// settle is the settle window of host's policy.
func (t *traffic) settle(host string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.policy(host).Settle
}
