package runner

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/idemrun/idemrun/store"
)

// HostFigures is what a runner knows of one host, for metrics and
// listings: totals since the runner first sent to the host (or since it
// forgot it, idle), and the recent figures of store.HostTraffic.
type HostFigures struct {
	Host                  string
	InFlight              int // sends and status queries under way
	Sends, TooMany, Fails uint64
	ServerErrors          uint64
	// TokenWaits counts the jobs left due for want of a token.
	TokenWaits uint64
	Breaker    string
	Throttled  bool
	Rate       float64 // the rate applied now, 0 for none
	// Recent is the last store.TrafficWindow of it.
	Recent store.HostTraffic
}

// HostFigures returns the runner's figures of every host it has sent to
// lately, ordered by host.
func (r *Runner) HostFigures() []HostFigures {
	t := r.traffic
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	// A runner younger than the window has sent over its life only.
	window := max(time.Second, min(store.TrafficWindow, now.Sub(t.born)))
	out := make([]HostFigures, 0, len(t.state))
	for host, h := range t.state {
		f := HostFigures{Host: host, InFlight: h.sending, Sends: h.sends, TooMany: h.n429, ServerErrors: h.n5xx, TokenWaits: h.waits,
			Fails: h.failures, Breaker: h.breaker.state.String(), Throttled: h.throttle.rate > 0, Rate: h.limRate}
		n := h.recent.sum(now)
		f.Recent = store.HostTraffic{Host: host, Runners: 1, InFlight: h.sending, SendRate: float64(n[figSend]) / window.Seconds(),
			TooMany: n[fig429], ServerErrors: n[fig5xx], Timeouts: n[figFailed], Breaker: f.Breaker, Throttled: f.Throttled, Rate: f.Rate}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b HostFigures) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// Traffic returns the runner's recent figures of every host it has sent
// to lately, ordered by host: what it publishes on a store.TrafficBoard.
func (r *Runner) Traffic() []store.HostTraffic {
	figs := r.HostFigures()
	out := make([]store.HostTraffic, len(figs))
	for i, f := range figs {
		out[i] = f.Recent
	}
	return out
}

// publishTraffic puts the runner's figures on the store's board, when it
// has one; a failure only leaves older figures there, so it is logged.
func (r *Runner) publishTraffic(now time.Time) {
	b, ok := r.store.(store.TrafficBoard)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.LeaseTTL/3)
	defer cancel()
	if err := b.PublishTraffic(ctx, r.cfg.ID, now, r.Traffic()); err != nil {
		r.cfg.Logger.Warn("publishing the runner's host figures failed; host list shows older ones", "err", err)
	}
}

// The figures recent counts.
const (
	figSend = iota
	fig429
	fig5xx
	figFailed
	figKinds
)

// recent counts a host's events of each kind over the last
// store.TrafficWindow, in slots of a second.
type recent struct {
	slots [recentSlots]struct {
		sec int64
		n   [figKinds]int64
	}
}

const recentSlots = int(store.TrafficWindow / time.Second)

func (r *recent) add(now time.Time, kind int) {
	sec := now.Unix()
	s := &r.slots[int(sec%int64(recentSlots))]
	if s.sec != sec {
		s.sec, s.n = sec, [figKinds]int64{}
	}
	s.n[kind]++
}

// sum is the counts of the slots within the window at now: the current
// second and the recentSlots-1 before it.
func (r *recent) sum(now time.Time) [figKinds]int64 {
	var out [figKinds]int64
	sec := now.Unix()
	for i := range r.slots {
		s := &r.slots[i]
		if s.sec > sec-int64(recentSlots) && s.sec <= sec {
			for k := range out {
				out[k] += s.n[k]
			}
		}
	}
	return out
}
