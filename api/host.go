package api

import (
	"context"
	"errors"
	"time"

	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/store"
)

// HostPolicy is one host's traffic policy (see store.HostPolicy): how
// fast and how much at once the runners send to it, whether it is
// paused, and who changed it last.
type HostPolicy = store.HostPolicy

// HostSettings are the limits SetHost changes; a nil field keeps the
// policy's value (none, on a host without a policy). Each is checked:
// an *InvalidError names the one out of bounds.
type HostSettings struct {
	// Rate is the most requests per second, above zero (ParseRate reads
	// 40/s, 100/m, 500/h).
	Rate *float64
	// Burst is how many requests may go at once after a quiet spell,
	// from 1.
	Burst *int
	// Concurrency is the most requests in flight at once, from 1.
	Concurrency *int
	// Settle is how long after an attempt started a status answer of
	// "not found" may lead to a replay, from 0 to 1h.
	Settle *time.Duration
}

// HostPolicies returns every host's own policy, ordered by host
// (store.DefaultHost, "*", first).
func (c *Client) HostPolicies(ctx context.Context) ([]HostPolicy, error) {
	if c.rem != nil {
		return c.rem.hostPolicies(ctx)
	}
	h, err := c.hostStore()
	if err != nil {
		return nil, err
	}
	return h.HostPolicies()
}

// SetHost changes the limits s gives in host's policy, creating the
// policy when the host has none; the others stay. host is as ParseHost
// takes it. actor (Actor() when empty) is recorded as UpdatedBy, with
// UpdatedAt. Runners apply the policy live.
func (c *Client) SetHost(ctx context.Context, host string, s HostSettings, actor string) (HostPolicy, error) {
	host, err := ParseHost(host)
	if err != nil {
		return HostPolicy{}, err
	}
	if err := s.check(); err != nil {
		return HostPolicy{}, err
	}
	if err := checkSteer(actor, ""); err != nil {
		return HostPolicy{}, err
	}
	actor = actorOr(actor)
	if c.rem != nil {
		if err := c.writable(); err != nil {
			return HostPolicy{}, err
		}
		in := adminwire.HostSet{Rate: s.Rate, Burst: s.Burst, Concurrency: s.Concurrency, Actor: actor}
		if s.Settle != nil {
			d := s.Settle.String()
			in.Settle = &d
		}
		return c.rem.setHost(ctx, host, in)
	}
	return c.updateHost(ctx, host, actor, func(p *HostPolicy, _ bool) error {
		if s.Rate != nil {
			p.Rate = *s.Rate
		}
		if s.Burst != nil {
			p.Burst = *s.Burst
		}
		if s.Concurrency != nil {
			p.Concurrency = *s.Concurrency
		}
		if s.Settle != nil {
			p.Settle = *s.Settle
		}
		return nil
	})
}

// UnsetHost deletes host's own policy, its pause included: the default
// policy applies to it again. A host without one is an error matching
// ErrNotFound.
func (c *Client) UnsetHost(ctx context.Context, host string) error {
	host, err := ParseHost(host)
	if err != nil {
		return err
	}
	if c.rem != nil {
		if err := c.writable(); err != nil {
			return err
		}
		return c.rem.unsetHost(ctx, host)
	}
	h, err := c.hostStore()
	if err != nil {
		return err
	}
	if err := h.UnsetHostPolicy(ctx, host); err != nil {
		return err
	}
	c.wakeRunner()
	return nil
}

// PauseHost stops every attempt and status query to host, on every
// runner of the store, until ResumeHost; its jobs wait and spend
// nothing. note says why. Pausing "*" pauses every host without a
// policy of its own. A paused host stays paused, its note replaced.
func (c *Client) PauseHost(ctx context.Context, host, actor, note string) (HostPolicy, error) {
	host, err := ParseHost(host)
	if err != nil {
		return HostPolicy{}, err
	}
	if err := checkSteer(actor, note); err != nil {
		return HostPolicy{}, err
	}
	actor = actorOr(actor)
	if c.rem != nil {
		if err := c.writable(); err != nil {
			return HostPolicy{}, err
		}
		return c.rem.hostAction(ctx, host, "pause", adminwire.Steer{Actor: actor, Note: note})
	}
	return c.updateHost(ctx, host, actor, func(p *HostPolicy, _ bool) error {
		p.Paused, p.Note = true, note
		return nil
	})
}

// ResumeHost ends host's pause and clears its note. A host that is not
// paused is left as it is (no policy is created for it) and returned.
func (c *Client) ResumeHost(ctx context.Context, host, actor string) (HostPolicy, error) {
	host, err := ParseHost(host)
	if err != nil {
		return HostPolicy{}, err
	}
	if err := checkSteer(actor, ""); err != nil {
		return HostPolicy{}, err
	}
	actor = actorOr(actor)
	if c.rem != nil {
		if err := c.writable(); err != nil {
			return HostPolicy{}, err
		}
		return c.rem.hostAction(ctx, host, "resume", adminwire.Steer{Actor: actor})
	}
	var unchanged HostPolicy
	p, err := c.updateHost(ctx, host, actor, func(p *HostPolicy, _ bool) error {
		if !p.Paused {
			unchanged = *p
			return errUnchanged
		}
		p.Paused, p.Note = false, ""
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return unchanged, nil
	}
	return p, err
}

// errUnchanged ends an update that would change nothing, storing nothing.
var errUnchanged = errors.New("api: nothing to change")

// updateHost applies fn to host's policy in the store, recording actor
// and the time, and wakes an embedded runner.
func (c *Client) updateHost(ctx context.Context, host, actor string, fn func(p *HostPolicy, exists bool) error) (HostPolicy, error) {
	h, err := c.hostStore()
	if err != nil {
		return HostPolicy{}, err
	}
	now := c.opts.Now().UTC()
	p, err := h.UpdateHostPolicy(ctx, host, func(p *HostPolicy, exists bool) error {
		if err := fn(p, exists); err != nil {
			return err
		}
		p.UpdatedAt, p.UpdatedBy = now, actor
		return nil
	})
	if err != nil {
		return HostPolicy{}, err
	}
	c.wakeRunner()
	return p, nil
}

// wakeRunner wakes a runner embedded in this process after a change of
// policy, so a host resumed or given room is served without waiting for
// a poll.
func (c *Client) wakeRunner() {
	if c.notify != nil {
		c.notify()
	}
}

// hostStore is the client's store as keeper of host policies.
func (c *Client) hostStore() (store.Hosts, error) {
	return c.st, nil
}
