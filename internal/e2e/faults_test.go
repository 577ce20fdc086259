package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// Storage faults injected at the store boundary (store.Options.CommitHook
// and MaxSize), read-only and damaged files. Every test counts what the
// target received: nothing may be sent without a durable attempt record.

// errDiskOnFire is the injected commit failure.
var errDiskOnFire = errors.New("disk on fire")

// countingTarget is an httptest server on 127.0.0.1 that counts requests
// and answers 200; before answering it calls onRequest, when set.
type countingTarget struct {
	srv       *httptest.Server
	n         atomic.Int64
	onRequest func()

	mu    sync.Mutex
	byKey map[string]int // requests per Idempotency-Key
}

func newCountingTarget(t *testing.T) *countingTarget {
	t.Helper()
	ct := &countingTarget{byKey: map[string]int{}}
	ct.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ct.n.Add(1)
		ct.mu.Lock()
		ct.byKey[r.Header.Get(idemkey.HeaderName)]++
		ct.mu.Unlock()
		if ct.onRequest != nil {
			ct.onRequest()
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"id":"pay_1"}`)
	}))
	t.Cleanup(ct.srv.Close)
	return ct
}

func (ct *countingTarget) url() string { return ct.srv.URL + paymentsPath }

// requestsFor is the number of requests received with idempotency key k.
func (ct *countingTarget) requestsFor(k string) int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.byKey[k]
}

// openAt opens the database at path with o (Warn discarded).
func openAt(t *testing.T, path string, o api.Options) *api.Client {
	t.Helper()
	o.Warn = io.Discard
	c, err := api.Open(path, &o)
	if err != nil {
		t.Fatalf("api.Open(%s): %v", filepath.Base(path), err)
	}
	return c
}

// closeChecked checks the file's consistency and closes c.
func closeChecked(t *testing.T, c *api.Client) {
	t.Helper()
	rep, err := c.Check(context.Background())
	if err != nil || !rep.OK() {
		t.Errorf("store check: err %v, problems %v", err, rep.Problems)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// totalOf sums a Stats map.
func totalOf(st api.Stats) int64 {
	var n int64
	for _, v := range st {
		n += v
	}
	return n
}

// signal sends on ch without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// faultConfig is the runner configuration of these tests.
func faultConfig() runner.Config {
	cfg := baseConfig()
	cfg.Logger = nil
	return cfg
}

// progress is signalled by every durable write a runner's worker makes
// (Config.OnWrite), so a test waits on it for the store to reach a state
// instead of polling on a timer.
type progress chan struct{}

// watchProgress makes cfg's runner signal the returned progress.
func watchProgress(cfg *runner.Config) progress {
	p := make(progress, 1) // a write after the last look is kept
	cfg.OnWrite = func(*store.Job) {
		select {
		case p <- struct{}{}:
		default:
		}
	}
	return p
}

// waitStats looks at c's stats now and after each write until done holds
// of them, and fails the test, saying what it waited for, if that takes
// longer than timeout. It returns the stats done held of.
func (p progress) waitStats(t *testing.T, c *api.Client, timeout time.Duration, what string, done func(api.Stats) bool) api.Stats {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		st, err := c.Stats(context.Background())
		if err == nil && done(st) {
			return st
		}
		select {
		case <-p:
		case <-deadline.C:
			t.Fatalf("%s: stats %v (err %v)", what, st, err)
		}
	}
}

// runInBackground starts r.Run and returns a function that cancels it and
// waits (at most runTimeout) for it to return.
func runInBackground(t *testing.T, r *runner.Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(runTimeout):
			t.Fatalf("runner did not stop within %s of its context's end", runTimeout)
			return nil
		}
	}
}

// waitFor waits until ch has delivered n signals, for at most runTimeout.
func waitFor(t *testing.T, ch chan struct{}, n int, what string) {
	t.Helper()
	deadline := time.NewTimer(runTimeout)
	defer deadline.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%s: got %d of %d signals within %s", what, i, n, runTimeout)
		}
	}
}

// An enqueue whose commit fails returns the error and leaves nothing: the
// job is absent after reopening, and its key is still free.
func TestEnqueueCommitFails(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	var failing atomic.Bool
	failing.Store(true)
	hook := func(int) error {
		if failing.Load() {
			return errDiskOnFire
		}
		return nil
	}
	tg := newCountingTarget(t)
	c := openAt(t, path, api.Options{Store: &bolt.Options{CommitHook: hook}})
	ctx := context.Background()
	req := api.Request{URL: tg.url(), Body: []byte(`{"amount":1}`)}
	res, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "fire-1"})
	if !errors.Is(err, errDiskOnFire) || errors.Is(err, api.ErrInvalid) {
		t.Errorf("Enqueue with a failing commit: got (%v, %v), want the commit error (not invalid input)", res, err)
	}
	if err != nil && !strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("Enqueue error %q, want it to say nothing was committed", err)
	}
	many, err := c.EnqueueMany(ctx, []api.ManyItem{{Request: req, Options: api.EnqueueOptions{Key: "fire-2"}}, {Request: req, Options: api.EnqueueOptions{Key: "fire-3"}}})
	if !errors.Is(err, errDiskOnFire) {
		t.Errorf("EnqueueMany with a failing commit: got (%v, %v), want the commit error", many, err)
	}
	if _, err := c.Get(ctx, "fire-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(fire-1) in the same process: got %v, want not found", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	c2 := openAt(t, path, api.Options{})
	defer closeChecked(t, c2)
	for _, k := range []string{"fire-1", "fire-2", "fire-3"} {
		if j, err := c2.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after reopening, Get(%s): got (%v, %v), want not found", k, j, err)
		}
	}
	st, err := c2.Stats(ctx)
	if err != nil || totalOf(st) != 0 {
		t.Errorf("after reopening: stats %v (err %v), want no jobs", st, err)
	}
	runUntilIdle(t, c2, baseConfig())
	if n := tg.n.Load(); n != 0 {
		t.Errorf("target got %d requests for jobs never committed, want 0", n)
	}
	again, err := c2.Enqueue(ctx, req, api.EnqueueOptions{Key: "fire-1"})
	if err != nil || again.Existing {
		t.Errorf("enqueue of the same key after the failure: got (%+v, %v), want a new job", again, err)
	}
}

// claimMarker marks the runner's claims, so the commit hook can fail
// exactly the commit that would record "attempt N started".
type claimMarker struct {
	store.Store
	claiming *atomic.Int32
}

func (m claimMarker) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	m.claiming.Add(1)
	defer m.claiming.Add(-1)
	return m.Store.ClaimDue(ctx, req)
}

// When the attempt record cannot be committed, the request is not sent:
// the target sees nothing and the job is still pending, never attempted.
func TestClaimCommitFailsSendsNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	tg := newCountingTarget(t)
	var claiming atomic.Int32
	refused := make(chan struct{}, 64)
	hook := func(int) error {
		if claiming.Load() > 0 {
			signal(refused)
			return errDiskOnFire
		}
		return nil
	}
	c := openAt(t, path, api.Options{Store: &bolt.Options{CommitHook: hook}})
	job := enqueue(t, c, tg.url(), []byte(`{"amount":7}`), api.EnqueueOptions{Key: "claim-fire"})
	cfg := faultConfig()
	cfg.UntilIdle = false
	r := runner.New(claimMarker{Store: c.Store(), claiming: &claiming}, cfg)
	stop := runInBackground(t, r)
	waitFor(t, refused, 3, "refused claim commits")
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := tg.n.Load(); n != 0 {
		t.Errorf("target got %d requests while no attempt record could be committed, want 0", n)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	c2 := openAt(t, path, api.Options{})
	defer closeChecked(t, c2)
	j := jobByKey(t, c2, "claim-fire")
	if j.State != store.StatePending || j.Attempts != 0 || !j.FirstSentAt.IsZero() || len(eventsOf(j, store.EventAttempt)) != 0 {
		t.Errorf("job after refused claims: got %s, want pending with no attempt", describe(j))
	}
	// The job is intact: a healthy runner sends it exactly once.
	runUntilIdle(t, c2, baseConfig())
	if j := jobByKey(t, c2, "claim-fire"); j.State != store.StateSucceeded || j.ID != job.ID {
		t.Errorf("job on a healthy disk: got %s, want succeeded", describe(j))
	}
	if n := tg.n.Load(); n != 1 {
		t.Errorf("target got %d requests after the disk healed, want 1", n)
	}
}

// When the outcome cannot be committed, the job stays running on disk;
// recovery turns it unknown, and it is never sent a second time.
func TestOutcomeCommitFailsStaysRunning(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	tg := newCountingTarget(t)
	var failing atomic.Bool
	refused := make(chan struct{}, 64)
	// The claim is durable before the first byte is sent, so from the
	// moment the target sees the request every commit fails.
	tg.onRequest = func() { failing.Store(true) }
	hook := func(int) error {
		if failing.Load() {
			signal(refused)
			return errDiskOnFire
		}
		return nil
	}
	c := openAt(t, path, api.Options{Store: &bolt.Options{CommitHook: hook}})
	enqueue(t, c, tg.url(), []byte(`{"amount":9}`), api.EnqueueOptions{Key: "outcome-fire"})
	r, err := c.NewRunner(faultConfig())
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, r)
	waitFor(t, refused, 1, "refused outcome commit")
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	c2 := openAt(t, path, api.Options{})
	j := jobByKey(t, c2, "outcome-fire")
	atts := eventsOf(j, store.EventAttempt)
	if j.State != store.StateRunning || j.Attempts != 1 || len(atts) != 1 || !atts[0].End.IsZero() {
		t.Errorf("job after a refused outcome commit: got %s, want running with attempt 1 open", describe(j))
	}
	rec, err := c2.NewRunner(faultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rec.Recover(context.Background()); n != 1 || err != nil {
		t.Errorf("Recover: got (%d, %v), want (1, nil)", n, err)
	}
	j = jobByKey(t, c2, "outcome-fire")
	if j.State != store.StateUnknown || !j.MayHaveEffect {
		t.Errorf("job after recovery: got %s, want unknown and may have had an effect", describe(j))
	}
	// No status URL and no key TTL: the runner must park it, not resend.
	runUntilIdle(t, c2, baseConfig())
	if j := jobByKey(t, c2, "outcome-fire"); j.State != store.StateNeedsAttention {
		t.Errorf("job after the next run: got %s, want needs_attention", describe(j))
	}
	if n := tg.n.Load(); n != 1 {
		t.Errorf("target got %d requests, want exactly 1", n)
	}
	closeChecked(t, c2)
}

// A full disk (store.Options.MaxSize) refuses the write that does not fit
// with a clear error; nothing partial is stored and the file stays whole.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	tg := newCountingTarget(t)
	c := openAt(t, path, api.Options{Store: &bolt.Options{MaxSize: 256 << 10}})
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 16<<10)
	var stored []string
	var full error
	for i := range 200 {
		key := fmt.Sprintf("full-%03d", i)
		_, err := c.Enqueue(ctx, api.Request{URL: tg.url(), Body: body}, api.EnqueueOptions{Key: key})
		if err != nil {
			full = err
			break
		}
		stored = append(stored, key)
	}
	if full == nil {
		t.Fatalf("200 enqueues of 16 KiB under a 256 KiB limit all succeeded; want a refusal")
	}
	if errors.Is(full, api.ErrInvalid) || !strings.Contains(full.Error(), "maximum size") || !strings.Contains(full.Error(), "nothing committed") {
		t.Errorf("refusal on a full disk: got %q, want a commit error saying the maximum size was reached and nothing was committed", full)
	}
	if len(stored) == 0 {
		t.Fatalf("no enqueue fit under the limit")
	}
	// Later writes are refused the same way, batches whole.
	_, err := c.EnqueueMany(ctx, []api.ManyItem{
		{Request: api.Request{URL: "http://127.0.0.1:9/pay", Body: body}, Options: api.EnqueueOptions{Key: "full-batch-1"}},
		{Request: api.Request{URL: "http://127.0.0.1:9/pay", Body: body}, Options: api.EnqueueOptions{Key: "full-batch-2"}},
	})
	if err == nil {
		t.Errorf("EnqueueMany on a full disk: got nil, want a refusal")
	}
	if st, err := c.Stats(ctx); err != nil || totalOf(st) != int64(len(stored)) {
		t.Errorf("stats on a full disk: got %v (err %v), want %d jobs", st, err, len(stored))
	}
	// A runner on the full disk: claims and outcomes may be refused, but
	// nothing may be sent without its attempt record on disk.
	r, err := c.NewRunner(faultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	runErr := r.Run(rctx)
	cancel()
	if runErr != nil && !strings.Contains(runErr.Error(), "maximum size") {
		t.Errorf("Run on a full disk: %v, want nil or a full-disk error", runErr)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	c2 := openAt(t, path, api.Options{})
	defer closeChecked(t, c2)
	st, err := c2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := c2.List(ctx, api.ListFilter{Limit: store.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if totalOf(st) != int64(len(page.Jobs)) || len(page.Jobs) != len(stored) {
		t.Errorf("after reopening: stats %v, list %d jobs, want %d jobs in both", st, len(page.Jobs), len(stored))
	}
	for _, k := range []string{"full-batch-1", "full-batch-2", fmt.Sprintf("full-%03d", len(stored))} {
		if _, err := c2.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused job %s: got %v, want not found", k, err)
		}
	}
	sent := 0
	for _, k := range stored {
		j := jobByKey(t, c2, k)
		if len(j.Request.Body) != len(body) {
			t.Errorf("job %s: body of %d bytes, want %d", k, len(j.Request.Body), len(body))
		}
		if n := tg.requestsFor(k); n > j.Attempts {
			t.Errorf("job %s: target got %d requests, but only %d attempts are on disk: %s", k, n, j.Attempts, describe(j))
		}
		sent += tg.requestsFor(k)
	}
	if int64(sent) != tg.n.Load() {
		t.Errorf("target got %d requests, %d of them for stored jobs", tg.n.Load(), sent)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// A read-only database file: writes fail with a clear error, never a
// panic, and a read-only open lists and shows its jobs.
func TestReadOnlyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ro.db")
	tg := newCountingTarget(t)
	c := openAt(t, path, api.Options{})
	job := enqueue(t, c, tg.url(), []byte(`{"a":1}`), api.EnqueueOptions{Key: "ro-1"})
	enqueue(t, c, tg.url(), []byte(`{"a":2}`), api.EnqueueOptions{Key: "ro-2"})
	closeChecked(t, c)
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	sum := fileSum(t, path)
	ctx := context.Background()

	if os.Geteuid() == 0 {
		// Root ignores file modes, so a 0400 file is writable here; the
		// read-only path is exercised through the ReadOnly options below.
		t.Log("running as root: file modes do not stop writes; exercising store.Options{ReadOnly: true} instead")
	} else {
		_, err := api.Open(path, &api.Options{Warn: io.Discard})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(path)) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("api.Open for writing of a 0400 file: got %v, want an error naming the file and the permission", err)
		}
	}
	for _, o := range []api.Options{{ReadOnly: true}, {Store: &bolt.Options{ReadOnly: true}}} {
		ro := openAt(t, path, o)
		page, err := ro.List(ctx, api.ListFilter{})
		if err != nil || len(page.Jobs) != 2 {
			t.Errorf("List on a read-only open: got %d jobs (err %v), want 2", len(page.Jobs), err)
		}
		if j, err := ro.Get(ctx, "ro-1"); err != nil || j.ID != job.ID {
			t.Errorf("Get on a read-only open: got (%v, %v), want job %s", j, err, job.ID)
		}
		if st, err := ro.Stats(ctx); err != nil || st["pending"] != 2 {
			t.Errorf("Stats on a read-only open: got %v (err %v), want pending=2", st, err)
		}
		writes := map[string]func() error{
			"Enqueue": func() error {
				_, err := ro.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay"}, api.EnqueueOptions{Key: "ro-3"})
				return err
			},
			"Cancel": func() error { _, err := ro.Cancel(ctx, "ro-1", "t", ""); return err },
			"Resolve": func() error {
				_, err := ro.Resolve(ctx, "ro-2", store.StateFailed, "t", "checked")
				return err
			},
		}
		for name, w := range writes {
			err := noPanic(t, name+" on a read-only open", w)
			if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), filepath.Base(path)) {
				t.Errorf("%s on a read-only open: got %v, want an error naming the file as read-only", name, err)
			}
		}
		r := runner.New(ro.Store(), faultConfig())
		if err := noPanic(t, "Run on a read-only open", func() error { return r.Run(ctx) }); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("Run on a read-only open: got %v, want a read-only error", err)
		}
		if err := ro.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	if n := tg.n.Load(); n != 0 {
		t.Errorf("target got %d requests from a read-only database, want 0", n)
	}
	if fileSum(t, path) != sum {
		t.Errorf("the read-only file changed")
	}
}

// noPanic runs fn and turns a panic into a test failure (and an error), so
// one damaged file cannot take the whole test binary down.
func noPanic(t *testing.T, what string, fn func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// fillForCorruption writes a database of 60 jobs of 1 KiB at path.
func fillForCorruption(t *testing.T, path string) {
	t.Helper()
	c := openAt(t, path, api.Options{})
	items := make([]api.ManyItem, 60)
	for i := range items {
		items[i] = api.ManyItem{Request: api.Request{URL: fmt.Sprintf("http://127.0.0.1:9/pay/%d", i), Body: bytes.Repeat([]byte("b"), 1<<10)},
			Options: api.EnqueueOptions{Key: fmt.Sprintf("corrupt-%02d", i)}}
	}
	for i := range items {
		if _, err := c.Enqueue(context.Background(), items[i].Request, items[i].Options); err != nil {
			t.Fatal(err)
		}
	}
	closeChecked(t, c)
}

// damagedEnv names the damaged file a child process of
// TestDamagedFileAPI probes.
const damagedEnv = "IDEMRUN_E2E_DAMAGED_FILE"

// A damaged file is reported, never a panic or a crash: opening it,
// listing, getting and counting its jobs either work or return an error
// naming the file, a backup does not panic, and the consistency check does
// not call the file healthy. Each copy is probed in a child process (this
// test binary again), since a fault on an mmapped page beyond the end of a
// truncated file kills a process outright.
func TestDamagedFileAPI(t *testing.T) {
	if path := os.Getenv(damagedEnv); path != "" {
		probeDamaged(t, path)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	fillForCorruption(t, good)
	for name, path := range storetest.DamagedCopies(t, good, dir, "corrupt-") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDamagedFileAPI$", "-test.count=1")
			cmd.Env = append(os.Environ(), damagedEnv+"="+path)
			out, err := cmd.CombinedOutput()
			if err != nil {
				if len(out) > 3000 {
					out = append(out[:3000], "…"...)
				}
				t.Errorf("probing %s: %v\n%s", filepath.Base(path), err, out)
			}
		})
	}
}

// probeDamaged runs every read of the API on the damaged file at path,
// writable and read-only.
func probeDamaged(t *testing.T, path string) {
	ctx := context.Background()
	base := filepath.Base(path)
	named := func(what string, err error) {
		t.Helper()
		// A panic was already reported by noPanic.
		if err != nil && !strings.HasPrefix(err.Error(), "panic: ") && !strings.Contains(err.Error(), base) {
			t.Errorf("%s: error %q does not name the file %s", what, err, base)
		}
	}
	for _, ro := range []bool{false, true} {
		var c *api.Client
		err := noPanic(t, fmt.Sprintf("Open (read-only %v)", ro), func() error {
			var err error
			c, err = api.Open(path, &api.Options{ReadOnly: ro, Warn: io.Discard, LockTimeout: 200 * time.Millisecond})
			return err
		})
		named("Open", err)
		if err != nil {
			continue
		}
		var problems bool
		for what, fn := range map[string]func() error{
			"List":   func() error { _, err := c.List(ctx, api.ListFilter{Limit: store.MaxListLimit}); return err },
			"Get":    func() error { _, err := c.Get(ctx, "corrupt-30"); return err },
			"Stats":  func() error { _, err := c.Stats(ctx); return err },
			"Backup": func() error { _, err := c.Backup(ctx, io.Discard); return err },
			"Check": func() error {
				rep, err := c.Check(ctx)
				problems = err != nil || !rep.OK()
				return err
			},
		} {
			err := noPanic(t, what, fn)
			if what != "Backup" && (what != "Get" || !errors.Is(err, store.ErrNotFound)) {
				named(what, err)
			}
		}
		if !problems {
			t.Errorf("Check (read-only %v) calls the damaged file healthy", ro)
		}
		_ = noPanic(t, "Close", c.Close)
	}
}
