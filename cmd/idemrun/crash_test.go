package main

// Crash tests with real processes and SIGKILL: a runner killed while its
// attempts are in flight (P3), and enqueues acknowledged just before the
// enqueuing process, or the runner serving it, is killed (P1).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// The enqueuer helper is this test binary run again with helperEnv set to
// a database path. It is dispatched from init, before TestMain, so the
// child neither rebuilds the idemrun binary nor leaks TestMain's build
// directory when it is killed.
const (
	helperEnv     = "IDEMRUN_HELPER_ENQUEUER" // database path
	helperModeEnv = "IDEMRUN_HELPER_MODE"     // "file" (api.Open), "socket" (api.DialSocket) or "many" (api.Open, EnqueueMany)
	helperURLEnv  = "IDEMRUN_HELPER_URL"      // the jobs' target URL
	helperMaxJobs = 100_000
	helperMaxRun  = 20 * time.Second
)

func init() {
	if db := os.Getenv(helperEnv); db != "" {
		os.Exit(helperEnqueuer(db, os.Getenv(helperModeEnv), os.Getenv(helperURLEnv)))
	}
}

// helperEnqueuer enqueues jobs with keys k0, k1, … and writes each key to
// stdout, one line per write, only after Enqueue returned nil. It stops at
// the first error (the runner serving the socket was killed), after
// helperMaxJobs jobs, or after helperMaxRun.
func helperEnqueuer(db, mode, url string) int {
	var svc *api.Client
	var err error
	switch mode {
	case "file":
		svc, err = api.Open(db, &api.Options{LockTimeout: 5 * time.Second, Direct: true})
	case "many":
		return helperEnqueueMany(db, url)
	case "socket":
		svc, err = api.DialSocket(db, nil)
	default:
		err = fmt.Errorf("unknown %s %q, want file or socket", helperModeEnv, mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueuer:", err)
		return 1
	}
	defer svc.Close()
	stop := time.Now().Add(helperMaxRun)
	for i := 0; i < helperMaxJobs && time.Now().Before(stop); i++ {
		key := fmt.Sprintf("k%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := svc.Enqueue(ctx, api.Request{URL: url, Body: []byte(key)}, api.EnqueueOptions{Key: key})
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "enqueuer: %s: %v\n", key, err)
			return 1
		}
		// os.Stdout is unbuffered: the line is in the pipe when this returns.
		if _, err := fmt.Fprintln(os.Stdout, key); err != nil {
			return 1
		}
	}
	return 0
}

// helperManyBatch is larger than the store's chunk of 256, so each call
// is made and written in overlapping pieces.
const helperManyBatch = 600

// helperEnqueueMany is helperEnqueuer with EnqueueMany calls: the keys of a
// batch are written to stdout only after the call returned and each of its
// results is a stored job.
func helperEnqueueMany(db, url string) int {
	c, err := api.Open(db, &api.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueuer:", err)
		return 1
	}
	defer c.Close()
	stop := time.Now().Add(helperMaxRun)
	for first := 0; first < helperMaxJobs && time.Now().Before(stop); first += helperManyBatch {
		items := make([]api.ManyItem, helperManyBatch)
		for i := range items {
			key := fmt.Sprintf("k%d", first+i)
			items[i] = api.ManyItem{Request: api.Request{URL: url, Body: []byte(key)}, Options: api.EnqueueOptions{Key: key}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.EnqueueMany(ctx, items)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "enqueuer: batch from k%d: %v\n", first, err)
			return 1
		}
		var out strings.Builder
		for i, r := range res {
			if r.Err != nil || r.Job == nil || r.Existing {
				fmt.Fprintf(os.Stderr, "enqueuer: %s: %+v\n", items[i].Options.Key, r)
				return 1
			}
			out.WriteString(items[i].Options.Key + "\n")
		}
		// os.Stdout is unbuffered: the lines are in the pipe when this returns.
		if _, err := io.WriteString(os.Stdout, out.String()); err != nil {
			return 1
		}
	}
	return 0
}

// enqueuerProc is a running enqueuer child and the keys it acknowledged.
type enqueuerProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	more   chan struct{} // a key was acknowledged (never blocks the reader)
	done   chan struct{} // stdout reached EOF and the child was waited for
	err    error         // cmd.Wait's error, valid after done is closed

	mu    sync.Mutex
	acked []string
}

// startEnqueuer runs the enqueuer helper on db in mode, with jobs aimed at
// url.
func startEnqueuer(t *testing.T, db, mode, url string) *enqueuerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEMRUN_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, helperEnv+"="+db, helperModeEnv+"="+mode, helperURLEnv+"="+url)
	p := &enqueuerProc{t: t, cmd: cmd, stderr: &syncBuffer{}, more: make(chan struct{}, 1), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				// A line without its newline was never acknowledged.
				break
			}
			p.mu.Lock()
			p.acked = append(p.acked, strings.TrimSuffix(line, "\n"))
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *enqueuerProc) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// keys returns the acknowledged keys; call it after done is closed to get
// all of them.
func (p *enqueuerProc) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...)
}

// waitAcked waits until at least n keys are acknowledged, for at most limit.
func (p *enqueuerProc) waitAcked(n int, limit time.Duration) {
	p.t.Helper()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for p.count() < n {
		select {
		case <-p.more:
		case <-p.done:
			if p.count() < n {
				p.t.Fatalf("enqueuer exited (%v) after %d acknowledged keys, want at least %d:\n%s", p.err, p.count(), n, p.stderr)
			}
		case <-timeout.C:
			p.t.Fatalf("enqueuer acknowledged %d keys in %s, want at least %d:\n%s", p.count(), limit, n, p.stderr)
		}
	}
}

// wait waits for the child to exit and its output to be read, for at most
// limit.
func (p *enqueuerProc) wait(limit time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("enqueuer still running %s after the kill:\n%s", limit, p.stderr)
	}
}

// killedBySIGKILL reports whether err (from cmd.Wait) says SIGKILL ended
// the process.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// checkAcked opens db once every process has let go of it and asserts that
// each acknowledged key holds its job, and that the file is consistent.
func checkAcked(t *testing.T, db, url string, acked []string) {
	t.Helper()
	c, err := api.Open(db, &api.Options{LockTimeout: 5 * time.Second, MustExist: true})
	if err != nil {
		t.Fatalf("opening the database after the kill: %v", err)
	}
	defer c.Close()
	ctx := context.Background()
	lost := 0
	for _, k := range acked {
		j, err := c.GetByKey(ctx, k)
		if err != nil {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged key %s: got %v, want its job on disk", k, err)
			}
			continue
		}
		if j.Key != k || j.URL != url || j.BodySize != len(k) {
			t.Errorf("acknowledged key %s: got key %q url %q body %d bytes, want key %q url %q body %d bytes", k, j.Key, j.URL, j.BodySize, k, url, len(k))
		}
	}
	if lost > 0 {
		t.Errorf("lost %d of %d acknowledged enqueues, want 0", lost, len(acked))
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range st {
		total += n
	}
	if total < int64(len(acked)) {
		t.Errorf("stats count %d jobs (%v), want at least the %d acknowledged", total, st, len(acked))
	}
	rep, err := c.Check(ctx)
	if err != nil || !rep.OK() {
		t.Errorf("check after the kill: got %v, problems %v; want a consistent file", err, rep.Problems)
	}
}

// crashRand is the test's random source; its seed is logged so a failing
// kill moment can be replayed.
func crashRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed>>32|1))
}

// P1: a process enqueuing on the file is killed with SIGKILL at a random
// moment; every key it acknowledged before dying is on disk.
func TestDurableEnqueueSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	killEnqueuerRounds(t, "file", 3, func(rng *rand.Rand) int { return 50 + rng.IntN(200) })
}

// killEnqueuerRounds runs rounds of: start the enqueuer helper in mode on a
// new file, wait until it acknowledged at least want(rng) keys, SIGKILL
// it, and check that every acknowledged key is on disk.
func killEnqueuerRounds(t *testing.T, mode string, rounds int, want func(*rand.Rand) int) {
	rng := crashRand(t)
	const url = "http://127.0.0.1:9/pay" // never sent: no runner runs here
	for round := range rounds {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			e := newEnv(t)
			p := startEnqueuer(t, e.db, mode, url)
			n := want(rng)
			p.waitAcked(n, 15*time.Second)
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatalf("SIGKILL to the enqueuer: %v", err)
			}
			p.wait(10 * time.Second)
			if !killedBySIGKILL(p.err) {
				t.Fatalf("enqueuer ended with %v, want killed by SIGKILL (the test needs a kill mid-run):\n%s", p.err, p.stderr)
			}
			acked := p.keys()
			t.Logf("killed after %d acknowledged keys (waited for %d)", len(acked), n)
			checkAcked(t, e.db, url, acked)
		})
	}
}

// P1 for EnqueueMany: a child enqueues batches of 600 (each made and
// written in overlapping chunks inside its one transaction) and is killed
// with SIGKILL right after acknowledged batches; every acknowledged key is
// on disk.
func TestDurableEnqueueManySurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	killEnqueuerRounds(t, "many", 2, func(rng *rand.Rand) int { return helperManyBatch + rng.IntN(4*helperManyBatch) })
}

// P1 through a runner: a child enqueues through the runner's admin socket,
// and the runner (which holds the file and does the commits) is killed with
// SIGKILL right after an acknowledged enqueue. Nothing is restarted: the
// file alone holds every acknowledged key.
func TestDurableEnqueueThroughRunnerSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	rng := crashRand(t)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	url := tg.url("/pay")
	for round := range 2 {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			e := newEnv(t)
			rp := e.startRunner("--db", e.db, "--workers", "4", "--poll-interval", "50ms", "--startup-spread", "1ms")
			p := startEnqueuer(t, e.db, "socket", url)
			n := 50 + rng.IntN(200)
			p.waitAcked(n, 15*time.Second)
			if code := rp.stop(syscall.SIGKILL); code != -int(syscall.SIGKILL) {
				t.Fatalf("runner exit: got %d, want %d (SIGKILL)\n%s", code, -int(syscall.SIGKILL), rp.logs)
			}
			// With the runner gone, the child's next enqueue fails and it
			// exits; every line it wrote is in the pipe.
			p.wait(15 * time.Second)
			if p.err == nil {
				t.Fatalf("enqueuer exited 0, want a failed enqueue once the runner was killed:\n%s", p.stderr)
			}
			acked := p.keys()
			t.Logf("runner killed after %d acknowledged keys (waited for %d)", len(acked), n)
			checkAcked(t, e.db, url, acked)
		})
	}
}

// P3 at the process level: `idemrun run` is killed with SIGKILL while eight
// attempts are in flight at a target that never answers. Each attempt's
// record was durable before its request left; a restarted runner turns all
// eight into unknown outcomes and sends nothing again (the quiet period
// holds off their status queries).
func TestCrashRunnerKilledMidAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{})
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			fmt.Fprint(w, `{"status":"succeeded"}`)
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// Runs before the server's Close (cleanups run last-in first-out), so no
	// handler is still blocked when Close waits for them.
	t.Cleanup(func() { close(release) })

	const jobs = 8
	keys := make([]string, jobs)
	items := make([]api.ManyItem, jobs)
	for i := range items {
		keys[i] = fmt.Sprintf("crash-%d", i)
		items[i] = api.ManyItem{
			Request: api.Request{URL: tg.url("/pay"), Header: []api.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"n":` + fmt.Sprint(i) + `}`)},
			Options: api.EnqueueOptions{Key: keys[i], StatusURL: tg.url("/status?key={key}"), AttemptTimeout: 5 * time.Minute},
		}
	}
	c, err := api.Open(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueMany(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Job == nil {
			t.Fatalf("enqueue %s: got %v, want a job", keys[i], r.Err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	args := []string{"--db", e.db, "--workers", "8", "--quiet-period", "1h", "--startup-spread", "1ms", "--poll-interval", "50ms", "--shutdown-grace", "2s"}
	first := e.startRunner(args...)
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for got := 0; got < jobs; {
		select {
		case s := <-tg.hits:
			if s.Method != http.MethodPost {
				t.Fatalf("target got %s %s%s before the kill, want only the %d creates", s.Method, s.Path, s.Query, jobs)
			}
			got++
		case <-first.exited:
			t.Fatalf("runner exited with %d before %d attempts were in flight:\n%s", first.code, jobs, first.logs)
		case <-timeout.C:
			t.Fatalf("target got %d of %d creates within 15s:\n%s", got, jobs, first.logs)
		}
	}
	if code := first.stop(syscall.SIGKILL); code != -int(syscall.SIGKILL) {
		t.Fatalf("runner exit: got %d, want %d (SIGKILL)", code, -int(syscall.SIGKILL))
	}
	perKey := map[string]int{}
	for _, s := range tg.requests("/pay") {
		perKey[s.Header.Get("Idempotency-Key")]++
	}
	for _, k := range keys {
		if perKey[k] != 1 {
			t.Errorf("creates with key %s before the kill: got %d, want 1 (all: %v)", k, perKey[k], perKey)
		}
	}

	// Write-ahead: with no runner, the file already says each attempt
	// started and never finished.
	ro, err := api.Open(e.db, &api.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("opening the file after SIGKILL: %v", err)
	}
	for _, k := range keys {
		j, err := ro.GetByKey(context.Background(), k)
		if err != nil {
			t.Fatalf("job %s after SIGKILL: %v", k, err)
		}
		ev := lastEvent(j.History, store.EventAttempt)
		if j.State != store.StateRunning || j.Attempts != 1 || ev == nil || !ev.End.IsZero() {
			t.Errorf("job %s after SIGKILL: got state %s, attempts %d, attempt event %+v; want running, 1, an open attempt event", k, j.State, j.Attempts, ev)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	// The real restart path: `idemrun run` again, then SIGTERM.
	restarted := time.Now()
	second := e.startRunner(args...)
	waitLog(t, second, "recovered jobs left running", 10*time.Second)
	if !strings.Contains(second.logs.String(), fmt.Sprintf("count=%d", jobs)) {
		t.Errorf("restart log: got\n%s\nwant recovery of count=%d jobs", second.logs, jobs)
	}
	if got := e.showJob(keys[0]); got["state"] != "unknown" {
		t.Errorf("show %s through the restarted runner: got state %v, want unknown", keys[0], got["state"])
	}
	// Twenty poll intervals in which nothing may be sent: no replay, and no
	// status query inside the quiet period.
	quiet := time.NewTimer(time.Second)
	select {
	case s := <-tg.hits:
		t.Errorf("restarted runner sent %s %s?%s (key %q), want nothing sent during the quiet period", s.Method, s.Path, s.Query, s.Header.Get("Idempotency-Key"))
	case <-quiet.C:
	}
	quiet.Stop()
	if code := second.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("restarted runner exit after SIGTERM: got %d, want 0\n%s", code, second.logs)
	}

	if n := tg.total(); n != jobs {
		t.Errorf("target requests in all: got %d, want %d (the creates sent before the kill, none again)", n, jobs)
	}
	if n := len(tg.requests("/status")); n != 0 {
		t.Errorf("status queries: got %d, want 0 inside the 1h quiet period", n)
	}

	c, err = api.Open(e.db, &api.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, k := range keys {
		j, err := c.GetByKey(ctx, k)
		if err != nil {
			t.Fatalf("job %s after restart: %v", k, err)
		}
		if j.State != store.StateUnknown || !j.MayHaveEffect || j.Attempts != 1 || j.LastClass != "unknown" {
			t.Errorf("job %s after restart: got state %s, may_have_effect %v, attempts %d, last_class %q; want unknown, true, 1, unknown", k, j.State, j.MayHaveEffect, j.Attempts, j.LastClass)
		}
		if earliest := restarted.Add(59 * time.Minute); j.NextRunAt.Before(earliest) {
			t.Errorf("job %s: next status query at %s, want after %s (quiet period 1h from the restart)", k, j.NextRunAt, earliest)
		}
		rec := lastEvent(j.History, store.EventRecovery)
		if rec == nil || rec.From != store.StateRunning || rec.To != store.StateUnknown || rec.N != 1 {
			t.Errorf("job %s: got recovery event %+v, want one from running to unknown for attempt 1", k, rec)
		}
		att := lastEvent(j.History, store.EventAttempt)
		if att == nil || att.N != 1 || att.End.IsZero() || att.Class != "unknown" {
			t.Errorf("job %s: got attempt event %+v, want attempt 1 closed with class unknown", k, att)
		}
		if n := countEvents(j.History, store.EventAttempt); n != 1 {
			t.Errorf("job %s: got %d attempt events, want 1", k, n)
		}
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st["unknown"] != jobs || st["pending"] != 0 || st["running"] != 0 {
		t.Errorf("stats after restart: got %v, want unknown=%d pending=0 running=0", st, jobs)
	}
	if rep, err := c.Check(ctx); err != nil || !rep.OK() {
		t.Errorf("check after restart: got %v, problems %v; want a consistent file", err, rep.Problems)
	}
}

// waitLog polls a runner's logs until they contain s, for at most limit.
func waitLog(t *testing.T, p *runnerProc, s string, limit time.Duration) {
	t.Helper()
	const every = 20 * time.Millisecond
	for i := 0; i <= int(limit/every); i++ {
		if strings.Contains(p.logs.String(), s) {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("runner exited with %d before logging %q:\n%s", p.code, s, p.logs)
		case <-time.After(every):
		}
	}
	t.Fatalf("runner did not log %q within %s:\n%s", s, limit, p.logs)
}

func lastEvent(h []store.Event, k store.EventKind) *store.Event {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == k {
			return &h[i]
		}
	}
	return nil
}

func countEvents(h []store.Event, k store.EventKind) int {
	n := 0
	for _, e := range h {
		if e.Kind == k {
			n++
		}
	}
	return n
}
