package api

import (
	"context"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

var _ runner.Store = (*store.DB)(nil)

// NewRunner returns a runner over this client's database, wired to it:
// enqueues wake the runner, error texts are scrubbed with the client's
// redaction rules, and the client's host allowlist is re-checked at send
// time after DNS resolution. Fields already set in cfg are kept.
func (c *Client) NewRunner(cfg runner.Config) (*runner.Runner, error) {
	if cfg.Redact == nil {
		cfg.Redact = c.Scrub
	}
	if cfg.CheckSend == nil && len(c.opts.AllowHosts) > 0 {
		check, err := SendCheck(c.opts.AllowHosts)
		if err != nil {
			return nil, err
		}
		cfg.CheckSend = func(ctx context.Context, j *store.Job) error { return check(ctx, j.Request.URL) }
	}
	r := runner.New(c.db, cfg)
	c.SetNotify(r.Notify)
	return r, nil
}
