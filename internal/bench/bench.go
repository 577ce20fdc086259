// Package bench measures idemrun the way River's `river bench` measures
// River: enqueue throughput (one by one from many producers, and in
// batches), then worked jobs per second against a loopback HTTP target,
// with the disk's raw commit rate measured in the same run so every figure
// is also a ratio. It backs `idemrun bench`.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// Config is one bench run.
type Config struct {
	// Jobs is how many jobs are enqueued and worked. Defaults to 20,000.
	Jobs int
	// Workers is the runner's worker count. Defaults to 100.
	Workers int
	// Producers is how many goroutines enqueue one job at a time.
	// Defaults to 64.
	Producers int
	// MaxConnsPerHost is passed to the runner (0: the runner's default).
	MaxConnsPerHost int
	// NetHTTP is passed to the runner: net/http's Transport instead of the
	// runner's own.
	NetHTTP bool
	// Preload fills the store with this many end-state jobs first.
	Preload int
	// DB, when set, is the bench's database file, on the filesystem to
	// bench on. It must not exist, nor must DB+".raw" and DB+".many" (the
	// raw-commit and EnqueueMany scratch files next to it): the bench
	// creates all three and deletes them when it ends.
	DB string
	// Dir, when DB is empty, is where the bench makes a new temporary
	// directory for its databases; the system's temporary directory when
	// empty. The directory and everything in it are deleted when the
	// bench ends.
	Dir string
	// Postgres, when set, is the URL of a Postgres database to bench on
	// instead of a bbolt file: the bench creates a schema of its own in
	// it, migrates it, and drops it with everything in it when it ends.
	// DB, Dir and Preload do not apply.
	Postgres string
	// PGConns is the size of the store's connection pool on Postgres;
	// DefaultPGConns(Workers) when zero.
	PGConns int
	// Out receives progress notes; nil discards.
	Out io.Writer
	// Profile, when set, receives a CPU profile of one phase:
	// ProfilePhase "work" (the runner working the jobs) or "many"
	// (EnqueueMany).
	Profile      io.Writer
	ProfilePhase string
}

// profile starts a CPU profile when phase is the one asked for and
// returns the function that stops it.
func (c *Config) profile(phase string) (func(), error) {
	if c.Profile == nil || c.ProfilePhase != phase {
		return func() {}, nil
	}
	if err := pprof.StartCPUProfile(c.Profile); err != nil {
		return nil, err
	}
	return pprof.StopCPUProfile, nil
}

// Result holds the figures. JSON names are a contract.
type Result struct {
	Jobs                int     `json:"jobs"`
	Workers             int     `json:"workers"`
	Producers           int     `json:"producers"`
	Preload             int     `json:"preload"`
	HTTPTransport       string  `json:"http_transport"`
	EnqueueJobsPerS     float64 `json:"enqueue_jobs_per_s"`
	EnqueueP50Ms        float64 `json:"enqueue_p50_ms"`
	EnqueueP99Ms        float64 `json:"enqueue_p99_ms"`
	EnqueueManyJobsPerS float64 `json:"enqueue_many_jobs_per_s"`
	WorkedJobsPerS      float64 `json:"worked_jobs_per_s"`
	CommitsPerJob       float64 `json:"commits_per_job"`
	PeakRSSMiB          float64 `json:"peak_rss_mib"`
	// RSSAnonMiB is the anonymous (heap and stacks) part of the resident
	// set at the end; the rest of peak_rss_mib is pages of the mapped
	// database file, which the kernel can drop at will.
	RSSAnonMiB             float64 `json:"rss_anon_mib"`
	RawUpdateCommitsPerS   float64 `json:"raw_update_commits_per_s"`
	StatsLatencyMs         float64 `json:"stats_latency_ms"`
	ClaimLatencyMs         float64 `json:"claim_latency_ms"`
	RestartToFirstSendMs   float64 `json:"restart_to_first_send_ms"`
	PreloadSeconds         float64 `json:"preload_s,omitempty"`
	TargetRequestsReceived int64   `json:"target_requests_received"`
	CommitMsAvg            float64 `json:"commit_ms_avg"`
	// WorkCPUMicrosPerJob is the process's CPU time (user + system, the
	// in-process target included) while working the jobs, per job. On a
	// shared machine it moves less than jobs/s between runs.
	WorkCPUMicrosPerJob float64 `json:"work_cpu_us_per_job"`
	OpsPerCommit        float64 `json:"ops_per_commit"`
	// HTTPCeilingReqPerS is the HTTP part of a worked job alone, measured
	// in the same run: the same POST from Workers senders through the
	// runner's client (its connection cap included) to a target like the
	// bench's, no store. Worked jobs/s cannot pass it.
	HTTPCeilingReqPerS float64 `json:"http_ceiling_req_per_s"`

	// Backend is the store benched: "bbolt" or "postgres".
	Backend string `json:"backend"`
	// On Postgres, the database's own ceilings, measured in the same run
	// in a scratch table of the bench's schema: single-row INSERTs each
	// committed on its own, back to back on one connection and on
	// PGConns connections at once; and rows/s of COPY in transactions of
	// PGBatchRows rows.
	PGConns           int     `json:"pg_conns,omitempty"`
	PGCommitsPerS1    float64 `json:"pg_insert_commits_per_s_1conn,omitempty"`
	PGCommitsPerSPool float64 `json:"pg_insert_commits_per_s_pool,omitempty"`
	PGBatchRowsPerS   float64 `json:"pg_batch_insert_rows_per_s,omitempty"`
	PGBatchRows       int     `json:"pg_batch_rows,omitempty"`
	// PGWALBytesPerJob is the WAL the server wrote during the work phase,
	// per job (the whole server's WAL: the bench's alone on a server no
	// one else writes to).
	PGWALBytesPerJob float64 `json:"pg_wal_bytes_per_worked_job,omitempty"`
	// Ratios holds every rate as a multiple of each ceiling of the run,
	// keyed "figure/ceiling" by their JSON names.
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

func (c *Config) defaults() {
	if c.Jobs <= 0 {
		c.Jobs = 20000
	}
	if c.Workers <= 0 {
		c.Workers = 100
	}
	if c.Producers <= 0 {
		c.Producers = 64
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
}

// target is the loopback HTTP server: 201 to every POST.
type target struct {
	srv      *http.Server
	url      string
	requests atomic.Int64
	posts    atomic.Int64 // the creates: POSTs
	first    chan struct{}
	once     sync.Once
}

func startTarget() (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &target{url: "http://" + ln.Addr().String(), first: make(chan struct{})}
	body := []byte(`{"id":"pay_1","status":"succeeded"}`)
	t.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		t.requests.Add(1)
		if r.Method == http.MethodPost {
			t.posts.Add(1)
		}
		t.once.Do(func() { close(t.first) })
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

// postOnce sends the POST of a worked job (its body, Content-Type and
// Idempotency-Key headers) through doer and reads the answer.
func postOnce(ctx context.Context, doer runner.Doer, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "bench-1")
	resp, err := doer.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d, want 201", resp.StatusCode)
	}
	return nil
}

// httpCeiling sends n POSTs from cfg.Workers goroutines through the
// runner's default Doer (the one its attempts use, with the same
// connection cap) to a target of its own, and returns requests/s.
func httpCeiling(ctx context.Context, cfg Config, n int) (float64, error) {
	tgt, err := startTarget()
	if err != nil {
		return 0, err
	}
	defer tgt.srv.Close()
	client := runner.DefaultDoer(runner.Config{Workers: cfg.Workers, MaxConnsPerHost: cfg.MaxConnsPerHost, NetHTTP: cfg.NetHTTP})
	if c, ok := client.(interface{ CloseIdleConnections() }); ok {
		defer c.CloseIdleConnections()
	}
	body := []byte(`{"amount":1000,"currency":"EUR"}`)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := postOnce(ctx, client, tgt.url, body); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, e.(error)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func (t *target) resetFirst() {
	t.first = make(chan struct{})
	t.once = sync.Once{}
}

func request(url string, i int) (api.Request, api.EnqueueOptions) {
	return api.Request{
			Method: "POST",
			URL:    url + "/payments",
			Header: []api.Header{{Name: "Content-Type", Value: "application/json"}},
			Body:   []byte(`{"amount":` + strconv.Itoa(1000+i) + `,"currency":"EUR"}`),
		}, api.EnqueueOptions{
			Key:            "bench-" + strconv.Itoa(i),
			StatusURL:      url + "/payments/{key}",
			AttemptTimeout: 10 * time.Second,
			// A long run (--jobs up to 10,000,000) must not outlive its
			// jobs: one claimed past its deadline fails, and the bench
			// would wait for its success for ever.
			Deadline: api.MaxDeadline,
		}
}

// CheckDBPath refuses a bench database path that would touch an existing
// file: the bench deletes its database and the scratch files next to it
// (path+".raw", path+".many") when it ends, so none of them may exist, and
// the directory that holds them must.
func CheckDBPath(path string) error {
	for _, p := range []string{path, path + ".raw", path + ".many"} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("bench: %s exists; the bench deletes its database and scratch files when it ends, so give a path where none exists", p)
		} else if !os.IsNotExist(err) {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("bench: the directory of %s does not exist", path)
	}
	return nil
}

// Run runs the bench.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if cfg.Postgres != "" {
		return runPostgres(ctx, cfg)
	}
	var dbPath, rawPath, manyPath string
	if cfg.DB != "" {
		dbPath, rawPath, manyPath = cfg.DB, cfg.DB+".raw", cfg.DB+".many"
		if err := CheckDBPath(cfg.DB); err != nil {
			return nil, err
		}
	} else {
		d, err := os.MkdirTemp(cfg.Dir, "idemrun-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dbPath, rawPath, manyPath = filepath.Join(d, "bench.db"), filepath.Join(d, "raw-commits.db"), filepath.Join(d, "bench-many.db")
	}
	// Every exit path deletes the scratch files (RawCommitsPerSecond
	// deletes its own).
	defer os.Remove(manyPath)
	defer os.Remove(dbPath)
	res := newResult(cfg, "bbolt")
	var err error
	if res.RawUpdateCommitsPerS, err = bolt.RawCommitsPerSecond(rawPath, time.Second); err != nil {
		return nil, fmt.Errorf("bench: raw commits: %w", err)
	}
	fmt.Fprintf(cfg.Out, "raw bbolt Update commits/s: %.0f\n", res.RawUpdateCommitsPerS)
	if res.HTTPCeilingReqPerS, err = httpCeiling(ctx, cfg, min(cfg.Jobs, 50000)); err != nil {
		return nil, fmt.Errorf("bench: HTTP ceiling: %w", err)
	}
	fmt.Fprintf(cfg.Out, "HTTP alone (%d senders, no store): %.0f req/s\n", cfg.Workers, res.HTTPCeilingReqPerS)

	tgt, err := startTarget()
	if err != nil {
		return nil, err
	}
	defer tgt.srv.Close()

	// Batch enqueue, in its own file, filled first as the main store is
	// (outside the profile and the timing).
	if cfg.Preload > 0 {
		if err := preloadFile(ctx, manyPath, cfg.Preload); err != nil {
			return nil, err
		}
	}
	stop, err := cfg.profile("many")
	if err != nil {
		return nil, err
	}
	res.EnqueueManyJobsPerS, err = enqueueMany(ctx, manyPath, tgt.url, cfg.Jobs)
	stop()
	if err != nil {
		return nil, err
	}
	os.Remove(manyPath)
	fmt.Fprintf(cfg.Out, "EnqueueMany: %.0f jobs/s\n", res.EnqueueManyJobsPerS)

	c, err := api.Open(dbPath, &api.Options{Direct: true})
	if err != nil {
		return nil, err
	}
	defer c.Close() // a second Close is a no-op
	db, err := boltOf(c)
	if err != nil {
		return nil, err
	}
	if cfg.Preload > 0 {
		start := time.Now()
		if err := preload(ctx, db, cfg.Preload); err != nil {
			return nil, err
		}
		res.PreloadSeconds = time.Since(start).Seconds()
		fmt.Fprintf(cfg.Out, "preloaded %d end-state jobs in %.1fs\n", cfg.Preload, res.PreloadSeconds)
	}
	cl := apiClient{c}
	if err := oneByOne(ctx, cfg, tgt.url, cl, res); err != nil {
		return nil, err
	}

	// Work them.
	var commitN, commitOps atomic.Int64
	var commitDur atomic.Int64
	db.SetCommitObserver(func(d time.Duration, ops int) {
		commitN.Add(1)
		commitOps.Add(int64(ops))
		commitDur.Add(int64(d))
	})
	commits0, _ := db.Counters()
	if err := work(ctx, cfg, cl, tgt, res); err != nil {
		return nil, err
	}
	commits1, _ := db.Counters()
	res.CommitsPerJob = float64(commits1-commits0) / float64(cfg.Jobs)
	db.SetCommitObserver(func(time.Duration, int) {})
	if n := commitN.Load(); n > 0 {
		res.CommitMsAvg = ms(time.Duration(commitDur.Load() / n))
		res.OpsPerCommit = float64(commitOps.Load()) / float64(n)
	}
	fmt.Fprintf(cfg.Out, "Worked (%d workers): %.0f jobs/s, %.3f commits/job, %.2f ms/commit, %.1f ops/commit, %.0f µs CPU/job\n", cfg.Workers, res.WorkedJobsPerS, res.CommitsPerJob, res.CommitMsAvg, res.OpsPerCommit, res.WorkCPUMicrosPerJob)

	latencies(ctx, cl, res)
	err = restart(ctx, cfg, tgt, cl, func() (client, error) {
		c, err := api.Open(dbPath, &api.Options{Direct: true})
		if err != nil {
			return nil, err
		}
		return apiClient{c}, nil
	}, res)
	if err != nil {
		return nil, err
	}
	res.PeakRSSMiB = procStatusMiB("VmHWM:")
	res.RSSAnonMiB = procStatusMiB("RssAnon:")
	res.ratios(map[string]float64{"raw_update_commits_per_s": res.RawUpdateCommitsPerS})
	return res, nil
}

func newResult(cfg Config, backend string) *Result {
	res := &Result{Jobs: cfg.Jobs, Workers: cfg.Workers, Producers: cfg.Producers, Preload: cfg.Preload, HTTPTransport: "runner", Backend: backend}
	if cfg.NetHTTP {
		res.HTTPTransport = "net/http"
	}
	return res
}

// ratios fills Ratios: each rate over each of the ceilings given.
func (res *Result) ratios(ceilings map[string]float64) {
	rates := map[string]float64{
		"enqueue_jobs_per_s":      res.EnqueueJobsPerS,
		"enqueue_many_jobs_per_s": res.EnqueueManyJobsPerS,
		"worked_jobs_per_s":       res.WorkedJobsPerS,
	}
	res.Ratios = map[string]float64{}
	for rn, r := range rates {
		for cn, c := range ceilings {
			if c > 0 {
				res.Ratios[rn+"/"+cn] = r / c
			}
		}
	}
	if res.HTTPCeilingReqPerS > 0 {
		res.Ratios["worked_jobs_per_s/http_ceiling_req_per_s"] = res.WorkedJobsPerS / res.HTTPCeilingReqPerS
	}
}

// client is what the bench uses of a store's client: an api.Client on
// bbolt, the bench's own over Postgres.
type client interface {
	Enqueue(ctx context.Context, req api.Request, o api.EnqueueOptions) error
	EnqueueMany(ctx context.Context, items []api.ManyItem) error
	NewRunner(cfg runner.Config) (*runner.Runner, error)
	Store() store.Store
	Close() error
}

// apiClient is an api.Client as a client.
type apiClient struct{ c *api.Client }

func (a apiClient) Enqueue(ctx context.Context, req api.Request, o api.EnqueueOptions) error {
	_, err := a.c.Enqueue(ctx, req, o)
	return err
}

func (a apiClient) EnqueueMany(ctx context.Context, items []api.ManyItem) error {
	res, err := a.c.EnqueueMany(ctx, items)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func (a apiClient) NewRunner(cfg runner.Config) (*runner.Runner, error) { return a.c.NewRunner(cfg) }
func (a apiClient) Store() store.Store                                  { return a.c.Store() }
func (a apiClient) Close() error                                        { return a.c.Close() }

// oneByOne enqueues cfg.Jobs jobs one at a time from cfg.Producers
// goroutines, recording each call's latency.
func oneByOne(ctx context.Context, cfg Config, url string, c client, res *Result) error {
	lat := make([]time.Duration, cfg.Jobs)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for p := 0; p < cfg.Producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Jobs {
					return
				}
				req, o := request(url, i)
				t0 := time.Now()
				if err := c.Enqueue(ctx, req, o); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("bench: enqueue: %w", e.(error))
	}
	el := time.Since(start)
	res.EnqueueJobsPerS = float64(cfg.Jobs) / el.Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.EnqueueP50Ms = ms(percentile(lat, 50))
	res.EnqueueP99Ms = ms(percentile(lat, 99))
	fmt.Fprintf(cfg.Out, "Enqueue (%d producers): %.0f jobs/s, p50 %.2f ms, p99 %.2f ms\n", cfg.Producers, res.EnqueueJobsPerS, res.EnqueueP50Ms, res.EnqueueP99Ms)
	return nil
}

// work runs a runner over c until cfg.Jobs jobs succeeded, and fills in
// the work figures. A job that ends any other way fails the bench.
func work(ctx context.Context, cfg Config, c client, tgt *target, res *Result) error {
	var succeeded atomic.Int64
	done := make(chan struct{})
	var doneOnce sync.Once
	var lost atomic.Pointer[store.Job] // a job that ended other than succeeded
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := c.NewRunner(runner.Config{
		// A log line per job would be part of what is measured.
		Logger:          slog.New(slog.DiscardHandler),
		Workers:         cfg.Workers,
		MaxConnsPerHost: cfg.MaxConnsPerHost,
		NetHTTP:         cfg.NetHTTP,
		StartupSpread:   time.Millisecond,
		OnWrite: func(j *store.Job) {
			switch {
			case j.State == store.StateSucceeded:
				if succeeded.Add(1) == int64(cfg.Jobs) {
					doneOnce.Do(func() { close(done) })
				}
			case j.State.Terminal() || j.State == store.StateNeedsAttention:
				// It will never succeed: fail the bench, do not wait.
				if lost.CompareAndSwap(nil, j) {
					doneOnce.Do(func() { close(done) })
				}
			}
		},
	})
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	stop, err := cfg.profile("work")
	if err != nil {
		return err
	}
	var stopOnce sync.Once
	stopWork := func() { stopOnce.Do(stop) }
	defer stopWork()
	start := time.Now()
	cpu0 := cpuTime()
	go func() { runErr <- r.Run(rctx) }()
	select {
	case <-done:
	case err := <-runErr:
		return fmt.Errorf("bench: runner stopped early: %v", err)
	case <-ctx.Done():
		cancel()
		<-runErr
		return ctx.Err()
	}
	el := time.Since(start)
	res.WorkCPUMicrosPerJob = float64(cpuTime()-cpu0) / float64(time.Microsecond) / float64(cfg.Jobs)
	stopWork()
	cancel()
	<-runErr
	if j := lost.Load(); j != nil {
		return fmt.Errorf("bench: job %s ended %s (%s); its figures would not be of N worked jobs", j.ID, j.State, j.LastError)
	}
	res.WorkedJobsPerS = float64(cfg.Jobs) / el.Seconds()
	res.TargetRequestsReceived = tgt.requests.Load()
	if posts := tgt.posts.Load(); posts != int64(cfg.Jobs) {
		// Counted at the target: each of the N jobs succeeded, so more
		// POSTs than jobs means a job was sent twice.
		return fmt.Errorf("bench: the target received %d POSTs for %d jobs that each succeeded once; want exactly %d", posts, cfg.Jobs, cfg.Jobs)
	}
	return nil
}

// latencies measures stats and an empty claim on the now-full store.
func latencies(ctx context.Context, c client, res *Result) {
	res.StatsLatencyMs = medianMs(31, func() error { _, err := c.Store().Stats(); return err })
	res.ClaimLatencyMs = medianMs(31, func() error {
		_, err := c.Store().ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: time.Now(), Limit: 100})
		return err
	})
}

// restart measures restart to first send: one due job, c closed, the
// store reopened, and the time until the target sees the job.
func restart(ctx context.Context, cfg Config, tgt *target, c client, reopen func() (client, error), res *Result) error {
	req, o := request(tgt.url, cfg.Jobs+1)
	if err := c.Enqueue(ctx, req, o); err != nil {
		return err
	}
	c.Close()
	tgt.resetFirst()
	t0 := time.Now()
	c2, err := reopen()
	if err != nil {
		return err
	}
	defer c2.Close()
	r2, err := c2.NewRunner(runner.Config{Workers: cfg.Workers, MaxConnsPerHost: cfg.MaxConnsPerHost, NetHTTP: cfg.NetHTTP, StartupSpread: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	r2ctx, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	r2done := make(chan error, 1)
	go func() { r2done <- r2.Run(r2ctx) }()
	defer func() { cancel2(); <-r2done }()
	select {
	case <-tgt.first:
		res.RestartToFirstSendMs = ms(time.Since(t0))
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("bench: no send within 30 s of restart")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// preloadFile fills the store at path with n end-state jobs (--preload
// for the EnqueueMany store: its figure is on the same store size as the
// others).
func preloadFile(ctx context.Context, path string, n int) error {
	c, err := api.Open(path, &api.Options{Direct: true})
	if err != nil {
		return err
	}
	db, err := boltOf(c)
	if err == nil {
		err = preload(ctx, db, n)
	}
	if err != nil {
		c.Close()
		return err
	}
	return c.Close()
}

// boltOf is the bbolt store under c: the bench measures bbolt's commits
// (Counters) and fills the file below the api (Seed).
func boltOf(c *api.Client) (*bolt.DB, error) {
	db, ok := c.Store().(*bolt.DB)
	if !ok {
		return nil, fmt.Errorf("bench: the store is %T, not a bbolt file", c.Store())
	}
	return db, nil
}

func enqueueMany(ctx context.Context, path, url string, n int) (float64, error) {
	c, err := api.Open(path, &api.Options{Direct: true})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return enqueueManyInto(ctx, apiClient{c}, url, n)
}

// enqueueManyInto enqueues n jobs into c in batches of 5,000 and returns
// jobs/s. Only the EnqueueMany calls are timed: building the items is the
// caller's work.
func enqueueManyInto(ctx context.Context, c client, url string, n int) (float64, error) {
	const batch = 5000
	items := make([]api.ManyItem, 0, batch)
	var took time.Duration
	for i := 0; i < n; i++ {
		req, o := request(url, i)
		items = append(items, api.ManyItem{Request: req, Options: o})
		if len(items) == batch || i == n-1 {
			start := time.Now()
			err := c.EnqueueMany(ctx, items)
			took += time.Since(start)
			if err != nil {
				return 0, err
			}
			items = items[:0]
		}
	}
	return float64(n) / took.Seconds(), nil
}

func preload(ctx context.Context, db *bolt.DB, n int) error {
	now := time.Now().UTC()
	const batch = 5000
	jobs := make([]*store.Job, 0, batch)
	for i := 0; i < n; i++ {
		j := &store.Job{
			ID: store.NewID(), Key: "preload-" + strconv.Itoa(i), Fingerprint: "sha256:preload", State: store.StateSucceeded,
			Request:   store.Request{Method: "POST", URL: "http://127.0.0.1:9/payments", Body: []byte(`{"amount":1}`)},
			CreatedAt: now, UpdatedAt: now, NextRunAt: now, Deadline: now.Add(15 * time.Minute),
			MaxAttempts: 5, DeadlineAfter: 15 * time.Minute, AttemptTimeout: 10 * time.Second, Attempts: 1,
			Result: &store.Result{HTTPStatus: 201, Body: []byte(`{"id":"pay"}`), Source: "attempt"},
		}
		jobs = append(jobs, j)
		if len(jobs) == batch || i == n-1 {
			if err := db.Seed(ctx, jobs); err != nil {
				return err
			}
			jobs = jobs[:0]
		}
	}
	return nil
}

// percentile is the nearest-rank p-th percentile of sorted: the smallest
// value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (len(sorted)*p + 99) / 100 // ceil(n·p/100), 1-based
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianMs(n int, fn func() error) float64 {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if fn() != nil {
			return -1
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ms(ds[n/2])
}

// procStatusMiB reads a kB figure of /proc/self/status (VmHWM: the peak
// resident set; RssAnon: its anonymous part now); 0 where there is no /proc.
func procStatusMiB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}
