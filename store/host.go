package store

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// DefaultHost names the policy of every host without its own.
const DefaultHost = "*"

// HostPolicy is the traffic policy of one target host: how fast and how
// much at once idemrun may send to it, or that it may not at all for now.
// Policies are data in the store, so every runner on it applies them live
// and they outlast restarts. Limits count attempts and status queries
// alike: both load the host's API.
type HostPolicy struct {
	// Host is the host as HostOf names it, or DefaultHost.
	Host string `json:"host"`
	// Rate is the most requests per second; 0 sets no limit.
	Rate float64 `json:"rate,omitempty"`
	// Burst is how many requests may go at once after a quiet spell;
	// 0 means a tenth of a second's worth of Rate (at least 1), so no
	// second sees much more than Rate.
	Burst int `json:"burst,omitempty"`
	// Concurrency is the most requests in flight at once; 0 sets no limit.
	Concurrency int `json:"concurrency,omitempty"`
	// Settle is how long after an attempt started a status answer of
	// "not found" may lead to a replay: a status endpoint that lags its
	// writes answers "not found" for a create still in progress.
	Settle time.Duration `json:"settle,omitempty"`
	// Paused stops every attempt and status query to the host until it
	// is resumed; its jobs wait and spend nothing.
	Paused bool `json:"paused,omitempty"`
	// Note says why, for a pause.
	Note string `json:"note,omitempty"`
	// UpdatedAt and UpdatedBy record the last change.
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by,omitempty"`
}

// Over is the policy a host follows: p, its own, with what p leaves unset
// (rate and burst, concurrency, settle) taken from def, the default
// policy's (DefaultHost). So a pause or a settle window of a host's own
// does not lift the default's limits from it. A pause and its note are
// the host's own.
func (p HostPolicy) Over(def HostPolicy) HostPolicy {
	if p.Rate <= 0 {
		p.Rate, p.Burst = def.Rate, def.Burst
	}
	if p.Concurrency <= 0 {
		p.Concurrency = def.Concurrency
	}
	if p.Settle <= 0 {
		p.Settle = def.Settle
	}
	return p
}

// Follows is the policy a host follows: its own (hasOwn) filled in by
// the default's (Over), or, without one, the default's whole, its pause
// included: pausing DefaultHost pauses every host without a policy of
// its own.
func Follows(own HostPolicy, hasOwn bool, def HostPolicy) HostPolicy {
	if !hasOwn {
		return def
	}
	return own.Over(def)
}

// Hosts keeps the host policies.
type Hosts interface {
	// HostPolicies returns every policy, ordered by host.
	HostPolicies() ([]HostPolicy, error)
	// UpdateHostPolicy loads host's policy (the zero policy for host,
	// exists false, when it has none), lets fn change it and stores it,
	// in one transaction; an error from fn stores nothing. fn may not
	// change Host.
	UpdateHostPolicy(ctx context.Context, host string, fn func(p *HostPolicy, exists bool) error) (HostPolicy, error)
	// UnsetHostPolicy deletes host's policy; ErrNotFound when it has none.
	UnsetHostPolicy(ctx context.Context, host string) error
}

// HostOf returns the host of a target or status URL as policies name it:
// lowercase, with the port when it is not the scheme's default. It
// returns "" for a URL that does not parse or has no host.
func HostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	switch {
	case port == "":
	case port == "80" && strings.EqualFold(u.Scheme, "http"):
	case port == "443" && strings.EqualFold(u.Scheme, "https"):
	default:
		host += ":" + port
	}
	return host
}

// ClaimHost is the host a claim of j would send to: its target's for a
// pending job (an attempt), its status URL's for an unknown one (a
// status query), the target's when it has no status URL.
func ClaimHost(j *Job) string {
	if j.State == StateUnknown && j.StatusURL != "" {
		if h := HostOf(strings.NewReplacer("{key}", "k", "{id}", "i").Replace(j.StatusURL)); h != "" {
			return h
		}
	}
	return HostOf(j.Request.URL)
}
