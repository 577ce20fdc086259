package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/postgres"
)

// cluster runs the demo on a Postgres database: Nodes runner processes
// share a schema the demo creates; each wave of jobs is enqueued while
// they run, then one node, drawn at random, is killed with SIGKILL and
// started again, so the others rescue its jobs once its lease expires.
// After the last wave the nodes run until every job has ended, are
// stopped, and the jobs are checked at the target.
func (r *run) cluster(ctx context.Context) (err error) {
	cfg := r.cfg
	schema := cfg.Schema
	if schema == "" {
		schema = newSchemaName()
	}
	r.sum.Nodes, r.sum.Schema = cfg.Nodes, schema
	if err := createSchema(ctx, cfg.DB, schema); err != nil {
		return err
	}
	// The schema is the demo's own: dropped at the end, unless the run
	// failed (not interrupted) and its jobs are the evidence.
	defer func() {
		if err == nil && !r.sum.OK() {
			r.sum.SchemaKept = true
			return
		}
		if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
			err = fmt.Errorf("%w (schema %s kept for inspection)", err, schema)
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := dropSchema(dctx, cfg.DB, schema); derr != nil && err == nil {
			err = derr
		}
	}()
	opts := &api.Options{Postgres: &postgres.Options{Schema: schema}, Warn: cfg.Out}
	if err := api.Migrate(ctx, cfg.DB, opts); err != nil {
		return fmt.Errorf("demo: migrate: %w", err)
	}
	c, err := api.Open(cfg.DB, opts)
	if err != nil {
		return fmt.Errorf("demo: open %s: %w", api.Redacted(cfg.DB), err)
	}
	defer c.Close()

	ns := newNodes(cfg, schema, r.sum, r.prog)
	defer ns.stop()
	if err := ns.start(); err != nil {
		return err
	}
	pollCtx, cancelPoll := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Add(1)
	go func() { defer polling.Done(); r.prog.poll(pollCtx, c.Stats) }()
	defer func() { cancelPoll(); polling.Wait() }()

	waves := cfg.Kills + 1
	for wave := 0; wave < waves; wave++ {
		keys, offset := r.wave(wave, waves)
		if err := enqueueRetrying(ctx, c, r, keys, offset, ns); err != nil {
			return err
		}
		if wave == waves/2 && cfg.MidRun != nil {
			// While the nodes work on the wave just enqueued.
			if err := ns.sleep(ctx, r.lifetime()/4); err != nil {
				return err
			}
			if err := cfg.MidRun(ctx); err != nil {
				return fmt.Errorf("demo: mid-run: %w", err)
			}
			r.sum.DBRestarts++
			r.prog.note("database crash-restarted")
		}
		if wave == waves-1 {
			break
		}
		if err := ns.sleep(ctx, r.lifetime()); err != nil {
			return err
		}
		if err := ns.killOne(ctx, r.rng.IntN(cfg.Nodes)); err != nil {
			return err
		}
		r.sum.Kills++
	}
	if err := ns.waitEnded(ctx, c, r.target, len(r.keys)); err != nil {
		return err
	}
	if err := ns.stop(); err != nil {
		return err
	}
	r.finished()
	return verifyJobs(c, r.target, r.keys, r.sum)
}

// enqueueRetrying enqueues a wave, again while the database refuses it
// (it may be restarting): the keys make a repeat harmless, each job is
// stored once.
func enqueueRetrying(ctx context.Context, c *api.Client, r *run, keys []string, offset int, ns *nodes) error {
	var err error
	for try := 0; try < 20; try++ {
		if err = enqueueItems(ctx, c, r.target, keys, offset); err == nil || errors.Is(err, api.ErrInvalid) {
			return err
		}
		if serr := ns.sleep(ctx, 250*time.Millisecond); serr != nil {
			return fmt.Errorf("%w (after %v)", serr, err)
		}
	}
	return err
}
