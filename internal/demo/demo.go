// Package demo runs idemrun against a fault-injecting fake payments target
// while a supervisor kills the runner process with SIGKILL at random
// moments, then checks the result at the target: no payment created twice,
// none lost, and every end state true to what the target holds. It backs
// `idemrun demo`, `make chaos` and the chaos test.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
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

// Summary is what a run found, checked at the target.
type Summary struct {
	Jobs         int            `json:"jobs"`
	ByState      map[string]int `json:"by_state"`
	Creates      int            `json:"creates_at_server"`
	Duplicates   []string       `json:"duplicate_keys"`
	Lost         []string       `json:"lost_keys"`
	Violations   []string       `json:"violations"`
	Kills        int            `json:"kills"`
	Starts       int            `json:"runner_starts"`
	AttemptsHist map[int]int    `json:"attempts_histogram"`
	QueriesHist  map[int]int    `json:"status_queries_histogram"`
	ElapsedSec   float64        `json:"elapsed_s"`
	JobsPerSec   float64        `json:"jobs_per_s"`
	Server       any            `json:"server_counters"`
}

// OK reports whether the promise held: no duplicate, nothing lost, no end
// state claiming more than the target holds.
func (s *Summary) OK() bool {
	return len(s.Duplicates) == 0 && len(s.Lost) == 0 && len(s.Violations) == 0
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
}

// Run performs the demo: start the target, enqueue in waves, run and kill
// the runner, run it to idle, and check everything at the target.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg.defaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "idemrun-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	dbPath := filepath.Join(cfg.Dir, "demo.db")
	target, err := faketarget.Start(faketarget.Config{Dedup: cfg.Dedup, Faults: *cfg.Faults, Seed: cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("demo: start target: %w", err)
	}
	defer target.Close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x1de))

	waves := cfg.Kills + 1
	keys := make([]string, cfg.Jobs)
	for i := range keys {
		keys[i] = fmt.Sprintf("demo-%x-%05d", cfg.Seed&0xffffff, i)
	}
	start := time.Now()
	sum := &Summary{Jobs: cfg.Jobs}
	prog := &progress{out: cfg.Out, live: cfg.Live, total: cfg.Jobs, start: start}

	next := 0
	for wave := 0; wave < waves; wave++ {
		// Enqueue this wave while no runner holds the file.
		n := cfg.Jobs / waves
		if wave == waves-1 {
			n = cfg.Jobs - next
		}
		if err := enqueueWave(ctx, dbPath, target, keys[next:next+n], next); err != nil {
			return nil, err
		}
		next += n
		final := wave == waves-1
		sum.Starts++
		killed, err := runOnce(ctx, cfg, dbPath, final, rng, prog)
		if err != nil {
			return nil, err
		}
		if killed {
			sum.Kills++
		}
	}
	prog.finish()
	sum.ElapsedSec = time.Since(start).Seconds()
	sum.JobsPerSec = float64(cfg.Jobs) / sum.ElapsedSec
	if err := verify(dbPath, target, keys, sum); err != nil {
		return nil, err
	}
	sum.Server = target.Requests()
	return sum, nil
}

// demoBody is the body of the i-th job, with key k: verify compares what
// the target received with it, not with what the store holds, so a store
// that swapped two jobs' bodies is caught too.
func demoBody(i int, k string) []byte {
	return []byte(fmt.Sprintf(`{"amount":%d,"currency":"EUR","ref":%q}`, 100+i, k))
}

func enqueueWave(ctx context.Context, dbPath string, target *faketarget.Server, keys []string, offset int) error {
	c, err := api.Open(dbPath, &api.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("demo: open %s: %w", dbPath, err)
	}
	defer c.Close()
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

// runOnce starts a runner process. Unless final, it kills it with SIGKILL
// after a random time (or lets it end if it goes idle first); a final
// runner runs until idle.
func runOnce(ctx context.Context, cfg Config, dbPath string, final bool, rng *rand.Rand, prog *progress) (killed bool, err error) {
	args := []string{"run", "--db", dbPath}
	if final {
		// Only the last runner stops by itself; the others run until their
		// SIGKILL, so every run gets exactly Kills kills.
		args = append(args, "--until-idle")
	}
	cmd := exec.Command(cfg.Binary, append(args,
		"--workers", fmt.Sprint(cfg.Workers),
		"--quiet-period", "300ms", "--backoff-base", "20ms", "--backoff-cap", "400ms",
		"--status-backoff-base", "100ms", "--status-timeout", "700ms", "--status-budget", "40",
		"--startup-spread", "100ms", "--poll-interval", "100ms", "--shutdown-grace", "2s",
		"--retention", "0", "--log-level", "warn")...)
	cmd.Stdout = cfg.RunnerLog
	cmd.Stderr = cfg.RunnerLog
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("demo: start runner: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var stopPoll sync.WaitGroup
	pollCtx, cancelPoll := context.WithCancel(ctx)
	stopPoll.Add(1)
	go func() { defer stopPoll.Done(); prog.poll(pollCtx, dbPath) }()
	defer func() { cancelPoll(); stopPoll.Wait() }()

	var killC <-chan time.Time
	if !final {
		span := cfg.KillAfterMax - cfg.KillAfterMin
		d := cfg.KillAfterMin + time.Duration(rng.Int64N(int64(span)+1))
		t := time.NewTimer(d)
		defer t.Stop()
		killC = t.C
	}
	select {
	case err := <-exited:
		if err != nil {
			return false, fmt.Errorf("demo: runner exited: %w", err)
		}
		if !final {
			return false, errors.New("demo: a runner without --until-idle exited by itself")
		}
		return false, nil
	case <-killC:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		prog.note("runner killed with SIGKILL")
		return true, nil
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return false, fmt.Errorf("demo: gave up after %s: %w", cfg.Timeout, ctx.Err())
	}
}

// verify compares every job with the target's ground truth.
func verify(dbPath string, target *faketarget.Server, keys []string, sum *Summary) error {
	c, err := api.Open(dbPath, &api.Options{LockTimeout: 5 * time.Second, MustExist: true, Direct: true})
	if err != nil {
		return fmt.Errorf("demo: reopen: %w", err)
	}
	defer c.Close()
	if rep, err := c.Check(context.Background()); err != nil || !rep.OK() {
		return fmt.Errorf("demo: database check failed: %v %v", err, rep.Problems)
	}
	sum.ByState = map[string]int{}
	sum.AttemptsHist = map[int]int{}
	sum.QueriesHist = map[int]int{}
	// A create still on its way when the last runner stopped (in the
	// target's latency pause, or committing slowly) happens in reality:
	// settle them before reading the truth.
	if !target.Settle(2 * time.Minute) {
		return errors.New("demo: the target's create handlers did not settle within 2 minutes")
	}
	jobs := make(map[string]*store.Job, len(keys))
	jobOf := make(map[string]string, len(keys))    // amount (unique per job) → key
	enqueued := make(map[string][]byte, len(keys)) // key → the body the demo enqueued
	for i, k := range keys {
		enqueued[k] = demoBody(i, k)
		jobOf[strconv.Itoa(100+i)] = k
		j, err := c.Store().GetByKey(k)
		if errors.Is(err, store.ErrNotFound) {
			continue // lost; reported below
		}
		if err != nil {
			return err
		}
		jobs[k] = j
		if !bytes.Equal(j.Request.Body, enqueued[k]) {
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s: the store holds the body %q, not the enqueued %q (P2)", k, j.Request.Body, enqueued[k]))
		}
	}
	// Payments are counted by what they pay for (the amount of their body,
	// unique per job), not by the key they came under: a duplicate sent
	// under another key is a duplicate all the same, and a key other than
	// the job's breaks P2.
	creates := map[string]int{}
	for hk := range target.CreatesByKey() {
		for _, p := range target.Payments(hk) {
			sum.Creates++
			k, ok := jobOf[string(p.Amount)]
			if !ok {
				sum.Violations = append(sum.Violations, fmt.Sprintf("payment %s under key %q belongs to no job", p.ID, hk))
				continue
			}
			creates[k]++
			if hk != k {
				sum.Violations = append(sum.Violations, fmt.Sprintf("payment %s for %s was sent under key %q (P2)", p.ID, k, hk))
			}
		}
	}
	for _, k := range keys {
		j := jobs[k]
		if j == nil {
			sum.Lost = append(sum.Lost, k)
			continue
		}
		// P2: every request the target received under the key carried the
		// bytes that were enqueued.
		for _, body := range target.BodiesByKey(k) {
			if !bytes.Equal(body, enqueued[k]) {
				sum.Violations = append(sum.Violations, fmt.Sprintf("%s: the target received a body %q, not the enqueued %q (P2)", k, body, enqueued[k]))
				break
			}
		}
		sum.ByState[string(j.State)]++
		sum.AttemptsHist[j.Attempts]++
		sum.QueriesHist[j.StatusQueries]++
		n := creates[k]
		switch {
		case n > 1:
			sum.Duplicates = append(sum.Duplicates, k)
		case j.State == store.StateSucceeded && n != 1:
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s succeeded but the target holds %d payments", k, n))
		case j.State == store.StateFailed && n != 0:
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s failed but the target holds %d payments", k, n))
		case j.State == store.StateCanceled && n != 0:
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s canceled but the target holds %d payments", k, n))
		case !j.State.Terminal() && j.State != store.StateNeedsAttention:
			sum.Lost = append(sum.Lost, k+" (left "+string(j.State)+")")
		}
	}
	sort.Strings(sum.Duplicates)
	return nil
}

// PrintSummary writes the summary a person reads at a glance.
func PrintSummary(w io.Writer, s *Summary) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "idemrun demo — results checked at the target")
	fmt.Fprintf(w, "  jobs enqueued          %d\n", s.Jobs)
	for _, st := range store.States() {
		if n := s.ByState[string(st)]; n > 0 {
			fmt.Fprintf(w, "    %-20s %d\n", st, n)
		}
	}
	fmt.Fprintf(w, "  creates at the server  %d\n", s.Creates)
	fmt.Fprintf(w, "  duplicates             %d   (must be 0)\n", len(s.Duplicates))
	fmt.Fprintf(w, "  lost jobs              %d   (must be 0)\n", len(s.Lost))
	fmt.Fprintf(w, "  false end states       %d   (must be 0)\n", len(s.Violations))
	fmt.Fprintf(w, "  runner SIGKILLs        %d   (runner started %d times)\n", s.Kills, s.Starts)
	fmt.Fprintf(w, "  attempts per job       %s\n", hist(s.AttemptsHist))
	fmt.Fprintf(w, "  status queries per job %s\n", hist(s.QueriesHist))
	fmt.Fprintf(w, "  elapsed                %.1fs (%.0f jobs/s end to end, faults and kills included)\n", s.ElapsedSec, s.JobsPerSec)
	for i, d := range s.Duplicates {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  DUPLICATE %s\n", d)
	}
	for i, l := range s.Lost {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  LOST %s\n", l)
	}
	for i, v := range s.Violations {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  FALSE %s\n", v)
	}
	if s.OK() {
		fmt.Fprintln(w, "  PASS: every payment created at most once; succeeded ⇔ created once; failed ⇒ never created")
	} else {
		fmt.Fprintln(w, "  FAIL")
	}
}

func hist(h map[int]int) string {
	var ks []int
	for k := range h {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%d:%d", k, h[k]))
	}
	return strings.Join(parts, "  ")
}
