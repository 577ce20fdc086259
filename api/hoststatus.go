package api

import (
	"context"
	"slices"
	"strings"

	"github.com/idemrun/idemrun/store"
)

// HostStatus is one host as `idemrun host list` shows it: its own
// policy, if any, the jobs waiting for it, and what the runners saw of it
// lately.
type HostStatus struct {
	Host string `json:"host"`
	// Policy is the host's own policy; nil when it has none and the
	// default policy ("*") applies.
	Policy *HostPolicy `json:"policy,omitempty"`
	// Pending and Unknown count the jobs waiting for the host (an attempt
	// to send, a status query to ask), by store.ClaimHost; Due counts
	// those of them due now.
	Pending int64 `json:"pending"`
	Unknown int64 `json:"unknown"`
	Due     int64 `json:"due"`
	// Partial is set when the counts stopped at MaxHostScan jobs of a
	// state: they are then at least these.
	Partial bool `json:"partial,omitempty"`
	// Traffic is what the live runners saw of the host over the last
	// store.TrafficWindow, summed: sends in flight, the send rate, 429s,
	// 5xx and timeouts, the breaker. Nil when no runner reports the host.
	// A bbolt file's runner reports through its admin socket; Postgres
	// runners publish theirs at each heartbeat of their lease, so the
	// figures there are up to a third of the lease's TTL old.
	Traffic *HostTraffic `json:"traffic,omitempty"`
}

// HostTraffic is what runners saw of one host lately (see
// store.HostTraffic).
type HostTraffic = store.HostTraffic

// MaxHostScan bounds the jobs of each state Hosts reads to count them on
// a backend that cannot count per host itself (store.HostCounter).
const MaxHostScan = 100000

// Hosts returns every host with a policy of its own, jobs waiting for it
// or recent traffic, ordered by host ("*" first).
func (c *Client) Hosts(ctx context.Context) ([]HostStatus, error) {
	if c.rem != nil {
		return c.rem.hosts(ctx)
	}
	h, err := c.hostStore()
	if err != nil {
		return nil, err
	}
	policies, err := h.HostPolicies()
	if err != nil {
		return nil, err
	}
	counts, partial, err := c.hostCounts(ctx)
	if err != nil {
		return nil, err
	}
	byHost := map[string]*HostStatus{}
	var out []*HostStatus
	at := func(host string) *HostStatus {
		if s := byHost[host]; s != nil {
			return s
		}
		s := &HostStatus{Host: host, Partial: partial}
		byHost[host] = s
		out = append(out, s)
		return s
	}
	for i := range policies {
		at(policies[i].Host).Policy = &policies[i]
	}
	for _, n := range counts {
		s := at(n.Host)
		s.Pending, s.Unknown, s.Due = n.Pending, n.Unknown, n.Due
	}
	traffic, err := c.hostTraffic(ctx)
	if err != nil {
		return nil, err
	}
	for i := range traffic {
		at(traffic[i].Host).Traffic = &traffic[i]
	}
	slices.SortFunc(out, func(a, b *HostStatus) int { return strings.Compare(a.Host, b.Host) })
	res := make([]HostStatus, len(out))
	for i, s := range out {
		res[i] = *s
	}
	return res, nil
}

// hostCounts counts the waiting jobs per host: by the store when it can
// (store.HostCounter), else from List, at most MaxHostScan jobs a state
// (partial when it stopped there).
func (c *Client) hostCounts(ctx context.Context) ([]store.HostCount, bool, error) {
	now := c.opts.Now()
	if hc, ok := c.st.(store.HostCounter); ok {
		counts, err := hc.HostCounts(ctx, now)
		return counts, false, err
	}
	byHost := map[string]*store.HostCount{}
	partial := false
	for _, st := range []store.State{store.StatePending, store.StateUnknown} {
		cursor, seen := "", 0
		for seen < MaxHostScan { // bounded: every page is at most MaxListLimit jobs
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
			p, err := c.st.List(store.ListFilter{States: []store.State{st}, Limit: store.MaxListLimit, Cursor: cursor, Oldest: true})
			if err != nil {
				return nil, false, err
			}
			for _, j := range p.Jobs {
				host := store.ClaimHost(j)
				n := byHost[host]
				if n == nil {
					n = &store.HostCount{Host: host}
					byHost[host] = n
				}
				if st == store.StatePending {
					n.Pending++
				} else {
					n.Unknown++
				}
				if !j.NextRunAt.After(now) {
					n.Due++
				}
			}
			seen += len(p.Jobs)
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		partial = partial || (seen >= MaxHostScan && cursor != "")
	}
	out := make([]store.HostCount, 0, len(byHost))
	for _, n := range byHost {
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b store.HostCount) int { return strings.Compare(a.Host, b.Host) })
	return out, partial, nil
}

// hostTraffic is the runners' recent figures of each host: from the
// store's board when runners share it (store.TrafficBoard), else from the
// runner embedded in this process, if any.
func (c *Client) hostTraffic(ctx context.Context) ([]store.HostTraffic, error) {
	if b, ok := c.st.(store.TrafficBoard); ok {
		return b.Traffic(ctx, c.opts.Now())
	}
	if c.traffic != nil {
		return c.traffic(), nil
	}
	return nil, nil
}
