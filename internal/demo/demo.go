// Package demo runs idemrun against a fault-injecting fake payments target
// while a supervisor kills the runner process with SIGKILL at random
// moments, then checks the result at the target: no payment created twice,
// none lost, and every end state true to what the target holds. It backs
// `idemrun demo`, `make chaos` and the chaos tests.
//
// On a bbolt file one runner works at a time (the file's lock); on a
// Postgres database several nodes share it, one is killed at a time and
// started again while the others rescue its jobs.
package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
)

// Config describes one demo or chaos run.
type Config struct {
	// Binary is the idemrun executable started as the runner process.
	Binary string
	// Dir holds the database; a temporary directory when empty.
	Dir string
	// Jobs is how many payment creates are enqueued. Defaults to 1000.
	Jobs int
	// Kills is how many times the runner is killed with SIGKILL. Defaults
	// to 2.
	Kills int
	// Workers is the runner's --workers. Defaults to 32.
	Workers int
	// Faults is the target's fault mix. Defaults to DefaultFaults().
	Faults *faketarget.Faults
	// Dedup makes the target deduplicate by key. Defaults to off: the
	// runner alone must prevent duplicates.
	Dedup bool
	// Seed drives the kill schedule and the target's faults. Defaults to
	// the current time.
	Seed uint64
	// KillAfterMin and KillAfterMax bound the random time a runner lives
	// before it is killed. Default 150 ms and 900 ms.
	KillAfterMin, KillAfterMax time.Duration
	// Timeout bounds the whole run. Defaults to 3 minutes.
	Timeout time.Duration
	// Out receives the progress line and the summary; nil discards.
	Out io.Writer
	// Live redraws the progress line in place (for a terminal).
	Live bool
	// RunnerLog receives the runner processes' standard error; nil
	// discards.
	RunnerLog io.Writer

	// DB is a Postgres URL (postgres:// or postgresql://): the runners
	// share that database, Nodes of them at once. Empty: a bbolt file in
	// Dir, one runner at a time.
	DB string
	// Schema is the Postgres schema the demo creates, runs in and drops;
	// it must not exist yet, so the demo never runs or deletes jobs it did
	// not enqueue. Defaults to "idemrun_demo_" and random hex.
	Schema string
	// Nodes is how many runner processes share the Postgres database.
	// Defaults to 1; more need DB.
	Nodes int
	// LeaseTTL is each node's --lease-ttl on Postgres: how soon the other
	// nodes rescue a killed node's jobs. Defaults to 2 seconds.
	LeaseTTL time.Duration
	// NodeDB is the URL the nodes reach the database by; defaults to DB
	// (a test puts a fault-injecting proxy there). The demo's own
	// enqueues and checks use DB.
	NodeDB string
	// MidRun, when set on Postgres, is called once halfway through the
	// kills while the nodes work, and counted in Summary.DBRestarts (the
	// chaos test crash-restarts the database there). An error ends the
	// run.
	MidRun func(ctx context.Context) error
}

// DefaultFaults is the demo's fault mix: every failure ARCHITECTURE.md §3 and §5
// names, often enough to matter.
func DefaultFaults() faketarget.Faults {
	return faketarget.Faults{
		LoseResponse:       0.08,
		Busy503:            0.05,
		TooMany429:         0.04,
		CommitThen500:      0.03,
		CommitThen502:      0.02,
		CommitThen504:      0.02,
		SlowCommit:         0.04,
		DropBeforeHandling: 0.03,
		FlakyStatus:        0.15,
		RetryAfter:         "1",
		SlowCommitDelay:    1500 * time.Millisecond,
		StatusHang:         1500 * time.Millisecond,
		Latency:            time.Millisecond,
	}
}

func (c *Config) defaults() {
	if c.Jobs <= 0 {
		c.Jobs = 1000
	}
	if c.Kills < 0 {
		c.Kills = 0
	}
	if c.Workers <= 0 {
		c.Workers = 32
	}
	if c.Faults == nil {
		f := DefaultFaults()
		c.Faults = &f
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.KillAfterMin <= 0 {
		c.KillAfterMin = 150 * time.Millisecond
	}
	if c.KillAfterMax < c.KillAfterMin {
		c.KillAfterMax = max(c.KillAfterMin, 900*time.Millisecond)
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Minute
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.RunnerLog == nil {
		c.RunnerLog = io.Discard
	}
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 2 * time.Second
	}
	if c.NodeDB == "" {
		c.NodeDB = c.DB
	}
}

// check refuses a configuration the demo cannot run.
func (c *Config) check() error {
	if c.DB != "" && !api.IsURL(c.DB) {
		return &api.InvalidError{Field: "db", Value: "a database that is not a postgres:// URL", Accepted: "a postgres:// or postgresql:// URL; without one the demo uses a scratch bbolt file of its own"}
	}
	if c.Nodes > 1 && c.DB == "" {
		return &api.InvalidError{Field: "nodes", Value: fmt.Sprint(c.Nodes), Accepted: "1 without a Postgres database; more only with a postgres:// --db, which the nodes share"}
	}
	if c.Schema != "" && c.DB == "" {
		return &api.InvalidError{Field: "schema", Value: fmt.Sprintf("%q", c.Schema), Accepted: "nothing without a postgres:// --db"}
	}
	return nil
}

// Run performs the demo: start the target, enqueue in waves, run and kill
// the runners, let them finish, and check everything at the target.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	target, err := faketarget.Start(faketarget.Config{Dedup: cfg.Dedup, Faults: *cfg.Faults, Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("demo: start target: %w", err)
	}
	defer target.Close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x1de))
	keys := make([]string, cfg.Jobs)
	for i := range keys {
		keys[i] = fmt.Sprintf("demo-%x-%05d", cfg.Seed&0xffffff, i)
	}
	start := time.Now()
	sum := &Summary{Jobs: cfg.Jobs}
	prog := &progress{out: cfg.Out, live: cfg.Live, total: cfg.Jobs, start: start}
	r := &run{cfg: cfg, target: target, keys: keys, sum: sum, prog: prog, rng: rng, start: start}
	if cfg.DB != "" {
		err = r.cluster(ctx)
	} else {
		err = r.file(ctx)
	}
	if err != nil {
		return nil, err
	}
	sum.Server = target.Requests()
	return sum, nil
}

// run is one Run's state, shared by the bbolt and the Postgres runs.
type run struct {
	cfg    Config
	target *faketarget.Server
	keys   []string
	sum    *Summary
	prog   *progress
	rng    *rand.Rand
	start  time.Time
}

// wave returns the keys of wave w of n and the index of its first job.
func (r *run) wave(w, n int) (keys []string, offset int) {
	per := len(r.keys) / n
	offset = w * per
	end := offset + per
	if w == n-1 {
		end = len(r.keys)
	}
	return r.keys[offset:end], offset
}

// finished records the run's times once the last runner stopped.
func (r *run) finished() {
	r.prog.finish()
	r.sum.ElapsedSec = time.Since(r.start).Seconds()
	r.sum.JobsPerSec = float64(r.cfg.Jobs) / r.sum.ElapsedSec
}

// demoBody is the body of the i-th job, with key k: verify compares what
// the target received with it, not with what the store holds, so a store
// that swapped two jobs' bodies is caught too.
func demoBody(i int, k string) []byte {
	return []byte(fmt.Sprintf(`{"amount":%d,"currency":"EUR","ref":%q}`, 100+i, k))
}

// enqueueItems enqueues the payment creates of keys, the first being job
// number offset.
func enqueueItems(ctx context.Context, c *api.Client, target *faketarget.Server, keys []string, offset int) error {
	items := make([]api.ManyItem, len(keys))
	for i, k := range keys {
		items[i] = api.ManyItem{
			Request: api.Request{
				Method: "POST",
				URL:    target.URL() + "/payments",
				Header: []api.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Authorization", Value: "Bearer demo-secret-token"}},
				Body:   demoBody(offset+i, k),
			},
			Options: api.EnqueueOptions{
				Key:            k,
				StatusURL:      target.StatusTemplate(),
				MaxAttempts:    8,
				Deadline:       2 * time.Minute,
				AttemptTimeout: time.Second,
			},
		}
	}
	res, err := c.EnqueueMany(ctx, items)
	if err != nil {
		return fmt.Errorf("demo: enqueue: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("demo: enqueue: %w", r.Err)
		}
	}
	return nil
}

// runnerArgs are the tuning flags of every runner the demo starts: short
// backoffs and queries, so faults and kills are worked through in seconds.
func (c *Config) runnerArgs() []string {
	return []string{"--workers", fmt.Sprint(c.Workers),
		"--quiet-period", "300ms", "--backoff-base", "20ms", "--backoff-cap", "400ms",
		"--status-backoff-base", "100ms", "--status-timeout", "700ms", "--status-budget", "40",
		"--startup-spread", "100ms", "--poll-interval", "100ms", "--shutdown-grace", "2s",
		// The fake target's status endpoint shows a create in progress
		// ("processing"), so "not found" needs no settle window.
		"--settle", "0s",
		"--retention", "0", "--log-level", "warn"}
}

// lifetime draws how long a runner lives before its SIGKILL.
func (r *run) lifetime() time.Duration {
	span := r.cfg.KillAfterMax - r.cfg.KillAfterMin
	return r.cfg.KillAfterMin + time.Duration(r.rng.Int64N(int64(span)+1))
}
