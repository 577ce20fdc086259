package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"text/tabwriter"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/bench"
	"github.com/idemrun/idemrun/store/postgres"
)

func (m *Main) bench(ctx context.Context, args []string) error {
	fs, db := m.flags("bench", "[--jobs N] [--workers W] [--producers P] [--preload N] [--db FILE | --dir DIR | --db postgres://… [--pg-conns N]] [--json]")
	// The bench's --db is a scratch file it creates and deletes, not the
	// store the other commands use: no $IDEMRUN_DB, no ./idemrun.db.
	fs.Lookup("db").Usage = "scratch database file to bench on (must not exist; created and deleted, with FILE.raw and FILE.many; default a temp dir), or a postgres:// URL (the bench works in a new schema of its own, dropped at the end)"
	jobs := fs.Int("jobs", 20000, "jobs to enqueue and work")
	wf := addWorkerFlags(fs, 100, "runner workers")
	producers := fs.Int("producers", 64, "goroutines enqueuing one job at a time")
	preload := fs.Int("preload", 0, "pre-fill the store with this many end-state jobs")
	dir := fs.String("dir", "", "directory for the scratch databases (the filesystem to bench on; default a temp dir); files are deleted")
	pgConns := fs.Int("pg-conns", 0, "with --db postgres://…: the store's connection pool size (default min(workers, 32))")
	asJSON := fs.Bool("json", false, "print the figures as a JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to FILE (of the whole run, or of --profile-phase)")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the whole run to FILE")
	phase := fs.String("profile-phase", "all", "what --cpuprofile covers: all, work (the runner working the jobs) or many (EnqueueMany)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("bench: unexpected argument %q", fs.Arg(0))
	}
	switch *phase {
	case "all", "work", "many":
	default:
		return &api.InvalidError{Field: "profile-phase", Value: fmt.Sprintf("%q", *phase), Accepted: "all, work, many"}
	}
	if fs.Changed("profile-phase") && *cpuProfile == "" {
		return usagef("bench: --profile-phase says what --cpuprofile FILE covers; give --cpuprofile with it")
	}
	if *jobs < 1 || *jobs > 10000000 {
		return &api.InvalidError{Field: "jobs", Value: fmt.Sprint(*jobs), Accepted: "1 to 10000000"}
	}
	if err := wf.check(); err != nil {
		return err
	}
	if *producers < 1 || *producers > 10000 {
		return &api.InvalidError{Field: "producers", Value: fmt.Sprint(*producers), Accepted: "1 to 10000"}
	}
	if *preload < 0 || *preload > 100000000 {
		return &api.InvalidError{Field: "preload", Value: fmt.Sprint(*preload), Accepted: "0 to 100000000"}
	}
	if *dir != "" {
		if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
			return &api.InvalidError{Field: "dir", Value: fmt.Sprintf("%q", *dir), Accepted: "an existing directory"}
		}
	}
	if fs.Changed("schema") {
		return &api.InvalidError{Field: "schema", Value: fmt.Sprintf("%q", fs.Lookup("schema").Value.String()), Accepted: "none: on Postgres the bench works in a new schema of its own (idemrun_bench_…), dropped at the end"}
	}
	pg := api.IsURL(*db)
	if fs.Changed("pg-conns") {
		if !pg {
			return &api.InvalidError{Field: "pg-conns", Value: fmt.Sprint(*pgConns), Accepted: "only with --db postgres://…"}
		}
		if *pgConns < 1 || *pgConns > 1000 {
			return &api.InvalidError{Field: "pg-conns", Value: fmt.Sprint(*pgConns), Accepted: "1 to 1000"}
		}
	}
	switch {
	case pg && *dir != "":
		return &api.InvalidError{Field: "dir", Value: fmt.Sprintf("%q", *dir), Accepted: "a directory for scratch files, which a bench on Postgres has none of"}
	case pg && *preload > 0:
		return &api.InvalidError{Field: "preload", Value: fmt.Sprint(*preload), Accepted: "0 with --db postgres://… (preloading is bbolt's only)"}
	case pg:
		if err := bench.CheckPostgresURL(*db); err != nil {
			return &api.InvalidError{Field: "db", Value: api.Redacted(*db), Accepted: "a postgres:// URL that parses"}
		}
		// A server that cannot be used is the user's to fix (exit 2),
		// told apart from the bench's own failures.
		if err := postgres.Ping(ctx, *db); err != nil {
			return openDBError(dbTarget{path: *db}, err)
		}
	case *db != "":
		if *dir != "" {
			return &api.InvalidError{Field: "db", Value: fmt.Sprintf("%q", *db), Accepted: "either --db or --dir, not both"}
		}
		if err := bench.CheckDBPath(*db); err != nil {
			return &api.InvalidError{Field: "db", Value: fmt.Sprintf("%q", *db), Accepted: "a path in an existing directory where neither FILE, FILE.raw nor FILE.many exists (the bench deletes them when it ends)"}
		}
	}
	// The profile files are created only once every flag is accepted, and
	// before anything runs: a path that cannot be written is refused now,
	// not after the whole bench.
	memFile, err := createProfile("memprofile", *memProfile)
	if err != nil {
		return err
	}
	if memFile != nil {
		defer memFile.Close()
	}
	profile, err := createProfile("cpuprofile", *cpuProfile)
	if err != nil {
		if memFile != nil {
			os.Remove(*memProfile) // bad input leaves nothing behind
		}
		return err
	}
	if profile != nil {
		defer profile.Close()
		if *phase == "all" {
			if err := pprof.StartCPUProfile(profile); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
	}
	// An interrupt ends the run through its context, so the scratch
	// files are deleted (and the demo's runner stopped) on the way out.
	// Refused flags, the profile files' included, leave the process's
	// signal handling alone.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tuneGC(m.Getenv) // the same collector settings as `idemrun run`
	cfg := bench.Config{Jobs: *jobs, Workers: *wf.workers, Producers: *producers, MaxConnsPerHost: *wf.maxConns, NetHTTP: wf.netHTTP(), Preload: *preload, DB: *db, Dir: *dir, Out: m.Stderr}
	if pg {
		cfg.DB, cfg.Postgres, cfg.PGConns = "", *db, *pgConns
	}
	if profile != nil && *phase != "all" {
		cfg.Profile, cfg.ProfilePhase = profile, *phase
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if memFile != nil {
		if err := pprof.Lookup("allocs").WriteTo(memFile, 0); err != nil {
			return err
		}
	}
	if *asJSON {
		return m.printJSON(res)
	}
	if pg {
		return printPostgres(m, res)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	raw := res.RawUpdateCommitsPerS
	row := func(name string, v float64, unit string, ratio bool) {
		r := ""
		if ratio && raw > 0 {
			r = fmt.Sprintf("%.1f× raw commits/s", v/raw)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%s\t%s\t\n", name, v, unit, r)
	}
	fmt.Fprintf(tw, "jobs\t%d\t\t\t\n", res.Jobs)
	fmt.Fprintf(tw, "workers / producers\t%d / %d\t\t\t\n", res.Workers, res.Producers)
	fmt.Fprintf(tw, "preloaded end-state jobs\t%d\t\t\t\n", res.Preload)
	row("raw bbolt Update commits", raw, "/s", false)
	row("enqueue, one by one", res.EnqueueJobsPerS, "jobs/s", true)
	row("enqueue p50", res.EnqueueP50Ms, "ms", false)
	row("enqueue p99", res.EnqueueP99Ms, "ms", false)
	row("EnqueueMany", res.EnqueueManyJobsPerS, "jobs/s", true)
	row("worked (POST to loopback)", res.WorkedJobsPerS, "jobs/s", true)
	row("commits per worked job", res.CommitsPerJob, "", false)
	row("stats latency", res.StatsLatencyMs, "ms", false)
	row("claim latency (nothing due)", res.ClaimLatencyMs, "ms", false)
	row("restart to first send", res.RestartToFirstSendMs, "ms", false)
	row("peak RSS (incl. mapped file)", res.PeakRSSMiB, "MiB", false)
	row("anonymous RSS at end", res.RSSAnonMiB, "MiB", false)
	return tw.Flush()
}

// printPostgres prints a bench on Postgres: every rate also as a multiple
// of the database's ceilings of the same run.
func printPostgres(m *Main, res *bench.Result) error {
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	ratio := func(v, c float64) string {
		if c <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", v/c)
	}
	row := func(name string, v float64, unit string) {
		fmt.Fprintf(tw, "%s\t%.3f\t%s\t\t\t\t\n", name, v, unit)
	}
	rate := func(name string, v float64) {
		fmt.Fprintf(tw, "%s\t%.0f\tjobs/s\t%s\t%s\t%s\t\n", name, v,
			ratio(v, res.PGCommitsPerS1), ratio(v, res.PGCommitsPerSPool), ratio(v, res.PGBatchRowsPerS))
	}
	fmt.Fprintf(tw, "jobs\t%d\t\t\t\t\t\n", res.Jobs)
	fmt.Fprintf(tw, "workers / producers / connections\t%d / %d / %d\t\t\t\t\t\n", res.Workers, res.Producers, res.PGConns)
	fmt.Fprintf(tw, "ceiling: INSERT commits, 1 connection\t%.0f\t/s\t\t\t\t\n", res.PGCommitsPerS1)
	fmt.Fprintf(tw, "ceiling: INSERT commits, %d connections\t%.0f\t/s\t\t\t\t\n", res.PGConns, res.PGCommitsPerSPool)
	fmt.Fprintf(tw, "ceiling: COPY, %d rows per transaction\t%.0f\trows/s\t\t\t\t\n", res.PGBatchRows, res.PGBatchRowsPerS)
	fmt.Fprintf(tw, "\t\t\t× 1-conn commits\t× %d-conn commits\t× COPY rows\t\n", res.PGConns)
	rate("enqueue, one by one", res.EnqueueJobsPerS)
	rate("EnqueueMany", res.EnqueueManyJobsPerS)
	rate("worked (POST to loopback)", res.WorkedJobsPerS)
	row("HTTP alone (no store)", res.HTTPCeilingReqPerS, "req/s")
	row("enqueue p50", res.EnqueueP50Ms, "ms")
	row("enqueue p99", res.EnqueueP99Ms, "ms")
	row("WAL per worked job", res.PGWALBytesPerJob, "bytes")
	row("CPU per worked job (this process)", res.WorkCPUMicrosPerJob, "µs")
	row("stats latency", res.StatsLatencyMs, "ms")
	row("claim latency (nothing due)", res.ClaimLatencyMs, "ms")
	row("restart to first send", res.RestartToFirstSendMs, "ms")
	row("peak RSS", res.PeakRSSMiB, "MiB")
	return tw.Flush()
}

// createProfile creates the file a profile flag names, refusing a path
// that cannot be created as bad input; no path, no file.
func createProfile(flag, path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, &api.InvalidError{Field: flag, Value: fmt.Sprintf("%q", path), Accepted: "a file that can be created (" + err.Error() + ")"}
	}
	return f, nil
}
