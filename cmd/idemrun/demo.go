package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/demo"
	"github.com/idemrun/idemrun/store/postgres"
)

func (m *Main) demo(ctx context.Context, args []string) error {
	fs, db := m.flags("demo", "[--db postgres://... [--nodes N] [--schema S]] [--jobs N] [--kills N] [--workers N] [--dedup] [--lose P] [--busy P] ... [--json]")
	// Only the flag counts, never $IDEMRUN_DB: without it the demo works
	// on a scratch bbolt file of its own.
	fs.Lookup("db").Usage = "a postgres:// URL: the demo's nodes share that database, in a schema the demo creates and drops (default: a scratch bbolt file of its own)"
	nodes := fs.Int("nodes", 1, "runner processes sharing the database at once (more than 1 needs a postgres:// --db)")
	// Only the flag counts, never $IDEMRUN_SCHEMA: the demo makes a
	// schema of its own, so its nodes never send jobs it did not enqueue.
	fs.Lookup("schema").Usage = "with --db: the schema to create, run in and drop; it must not exist (default idemrun_demo_ and random hex)"
	f := demo.DefaultFaults()
	jobs := fs.Int("jobs", 1000, "payment creates to enqueue")
	kills := fs.Int("kills", 3, "times the runner is killed with SIGKILL")
	workers := fs.Int("workers", 32, "runner workers")
	dedup := fs.Bool("dedup", false, "make the fake target deduplicate by key (off: idemrun alone prevents duplicates)")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock)")
	chaos := fs.Bool("chaos", false, "chaos profile: more kills (20 unless --kills is given), shorter lives")
	fs.Float64Var(&f.LoseResponse, "lose", f.LoseResponse, "probability: commit, then drop the connection")
	fs.Float64Var(&f.Busy503, "busy", f.Busy503, "probability: 503 + Retry-After before committing")
	fs.Float64Var(&f.TooMany429, "throttle", f.TooMany429, "probability: 429 + Retry-After before committing")
	fs.Float64Var(&f.CommitThen500, "commit500", f.CommitThen500, "probability: commit, then 500")
	fs.Float64Var(&f.CommitThen502, "commit502", f.CommitThen502, "probability: commit, then 502")
	fs.Float64Var(&f.CommitThen504, "commit504", f.CommitThen504, "probability: commit, then 504")
	fs.Float64Var(&f.SlowCommit, "slow", f.SlowCommit, "probability: commit after the client's attempt timeout")
	fs.Float64Var(&f.DropBeforeHandling, "drop", f.DropBeforeHandling, "probability: drop the connection before handling")
	fs.Float64Var(&f.FlakyStatus, "flaky-status", f.FlakyStatus, "probability: status endpoint answers 503 or hangs")
	fs.DurationVar(&f.Latency, "latency", f.Latency, "added latency per request")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	verbose := fs.Bool("verbose", false, "show the runner processes' logs")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("demo: unexpected argument %q", fs.Arg(0))
	}
	schema := fs.Lookup("schema").Value.String()
	if *db != "" && !api.IsURL(*db) {
		return &api.InvalidError{Field: "db", Value: fmt.Sprintf("%q", *db), Accepted: "a postgres:// or postgresql:// URL, which the demo's nodes share; without --db the demo works on a scratch bbolt file of its own, which it deletes"}
	}
	if *nodes < 1 || *nodes > 64 {
		return &api.InvalidError{Field: "nodes", Value: fmt.Sprint(*nodes), Accepted: "an integer from 1 to 64"}
	}
	if *nodes > 1 && *db == "" {
		return &api.InvalidError{Field: "nodes", Value: fmt.Sprint(*nodes), Accepted: "1 without --db; more only with a postgres:// --db, which the nodes share (a bbolt file takes one runner at a time)"}
	}
	if schema != "" && *db == "" {
		return &api.InvalidError{Field: "schema", Value: fmt.Sprintf("%q", schema), Accepted: "nothing without a postgres:// --db"}
	}
	if *workers < 1 || *workers > 10000 {
		return &api.InvalidError{Field: "workers", Value: fmt.Sprint(*workers), Accepted: "an integer from 1 to 10000"}
	}
	if f.Latency < 0 || f.Latency > time.Minute {
		return &api.InvalidError{Field: "latency", Value: f.Latency.String(), Accepted: "a duration from 0 to 1m"}
	}
	if *jobs < 1 || *jobs > 1000000 {
		return &api.InvalidError{Field: "jobs", Value: fmt.Sprint(*jobs), Accepted: "1 to 1000000"}
	}
	if *chaos && !fs.Changed("kills") {
		*kills = 20
	}
	if *kills < 0 || *kills > 1000 {
		return &api.InvalidError{Field: "kills", Value: fmt.Sprint(*kills), Accepted: "0 to 1000"}
	}
	if *jobs < *kills+1 {
		// Jobs are enqueued in kills+1 waves, one per runner life: fewer
		// jobs leave runners with nothing to do when they are killed.
		return &api.InvalidError{Field: "jobs", Value: fmt.Sprint(*jobs), Accepted: fmt.Sprintf("at least kills+1 = %d, so every killed runner has work in flight", *kills+1)}
	}
	for name, p := range map[string]float64{"lose": f.LoseResponse, "busy": f.Busy503, "throttle": f.TooMany429, "commit500": f.CommitThen500,
		"commit502": f.CommitThen502, "commit504": f.CommitThen504, "slow": f.SlowCommit, "drop": f.DropBeforeHandling, "flaky-status": f.FlakyStatus} {
		if !(p >= 0 && p <= 1) { // NaN fails both comparisons
			return &api.InvalidError{Field: name, Value: fmt.Sprint(p), Accepted: "a probability from 0 to 1"}
		}
	}
	if *db != "" {
		// A server that cannot be used is the user's to fix (exit 2).
		if err := postgres.Ping(ctx, *db); err != nil {
			return openDBError(dbTarget{path: *db}, err)
		}
	}
	// An interrupt ends the run through its context, so the scratch
	// files are deleted (and the demo's runner stopped) on the way out.
	// Refused flags leave the process's signal handling alone.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: cannot find my own binary to start runners: %w", err)
	}
	cfg := demo.Config{Binary: bin, Jobs: *jobs, Kills: *kills, Workers: *workers, Faults: &f, Dedup: *dedup, Seed: *seed,
		Out: m.Stdout, Live: isTTY(m.Stdout) && !*asJSON, DB: *db, Schema: schema, Nodes: *nodes}
	if *asJSON {
		cfg.Out = m.Stderr
	}
	if *verbose {
		cfg.RunnerLog = m.Stderr
	}
	if *chaos {
		cfg.KillAfterMin, cfg.KillAfterMax = 50*time.Millisecond, 600*time.Millisecond
		cfg.Timeout = 10 * time.Minute
	}
	if *db == "" {
		fmt.Fprintf(cfg.Out, "idemrun demo: %d payment creates against a fake target on 127.0.0.1 (dedup %v), faults on, runner killed with SIGKILL %d times\n", *jobs, *dedup, *kills)
	} else {
		fmt.Fprintf(cfg.Out, "idemrun demo: %d payment creates against a fake target on 127.0.0.1 (dedup %v), faults on, %d node(s) sharing %s, one killed with SIGKILL %d times\n",
			*jobs, *dedup, *nodes, api.Redacted(*db), *kills)
	}
	sum, err := demo.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := m.printJSON(sum); err != nil {
			return err
		}
	} else {
		demo.PrintSummary(m.Stdout, sum)
	}
	if !sum.OK() {
		return &silentError{code: exitFailure}
	}
	return nil
}
