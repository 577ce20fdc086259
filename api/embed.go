package api

import (
	"context"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

var _ runner.Store = store.Store(nil)

// NewRunner returns a runner over this client's database, wired to it:
// enqueues wake the runner, error texts are scrubbed with the client's
// redaction rules, and the client's host allowlist is re-checked before
// every attempt and every status query (the host on the list, every
// address it resolves to allowed) and again by the dialer on the address
// it connects to, so a name that resolves elsewhere by then is refused
// too. Fields already set in cfg are kept. Use it rather than runner.New
// over Store(), which wires none of this.
//
// With cfg.Logger nil the runner logs to slog.Default(): at info, a line
// per job that ends or needs a person and a summary every minute while
// busy, error texts redacted as above. Give slog.New(slog.DiscardHandler)
// to log nothing.
func (c *Client) NewRunner(cfg runner.Config) (*runner.Runner, error) {
	if c.rem != nil {
		return nil, c.notOffered("a runner")
	}
	if cfg.Redact == nil {
		cfg.Redact = c.Scrub
	}
	if len(c.opts.AllowHosts) > 0 {
		check, err := SendCheck(c.opts.AllowHosts)
		if err != nil {
			return nil, err
		}
		if cfg.CheckSend == nil {
			cfg.CheckSend = func(ctx context.Context, j *store.Job) error { return check(ctx, j.Request.URL) }
		}
		if cfg.CheckQuery == nil {
			cfg.CheckQuery = func(ctx context.Context, j *store.Job) error {
				if j.StatusURL == "" {
					return nil // a custom checker's job: nothing of ours to check
				}
				return check(ctx, templateURL(j.StatusURL))
			}
		}
		if cfg.DialControl == nil {
			cfg.DialControl = dialControl
		}
	}
	// Wait reads a job again after each of the runner's writes.
	onWrite := cfg.OnWrite
	cfg.OnWrite = func(j *store.Job) {
		if onWrite != nil {
			onWrite(j)
		}
		c.changes.wake(j.ID)
	}
	r := runner.New(c.st, cfg)
	c.SetNotify(r.Notify)
	c.traffic = r.Traffic
	return r, nil
}
