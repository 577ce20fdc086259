package runner_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// The runner talks to storage only through its Store interface.
var _ runner.Store = (*bolt.DB)(nil)

// runTimeout bounds every Run in these tests.
const runTimeout = 15 * time.Second

// openStore opens a real bbolt store in a temporary directory. Cleanup runs
// the store's consistency check, then closes it; it is registered first, so
// it runs after every server and runner of the test has stopped.
func openStore(t *testing.T) *bolt.DB {
	t.Helper()
	return openStoreAt(t, filepath.Join(t.TempDir(), "idemrun.db"))
}

// openStoreAt is openStore on a given path.
func openStoreAt(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	t.Cleanup(func() {
		rep, err := db.Check()
		if err != nil {
			t.Errorf("store check: %v", err)
		} else if !rep.OK() {
			t.Errorf("store check found problems: %v", rep.Problems)
		}
		if err := db.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	return db
}

// received is one request as the target saw it.
type received struct {
	Method string
	URI    string
	Host   string
	Header http.Header
	Body   []byte
}

// target is an httptest server on 127.0.0.1 that records every request it
// receives before its handler answers.
type target struct {
	srv *httptest.Server

	count atomic.Int64
	mu    sync.Mutex
	reqs  []received
}

// targetHandler answers the n-th request (1-based) the target received;
// the body has already been read into rec.Body.
type targetHandler func(w http.ResponseWriter, r *http.Request, n int64, rec received)

// newTarget starts a recording target. Its Close is registered for
// cleanup; anything the handler blocks on must be released by a cleanup
// registered after newTarget returns.
func newTarget(t *testing.T, h targetHandler) *target {
	t.Helper()
	tg := &target{}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// The request never fully arrived; it is not counted.
			return
		}
		rec := received{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: body}
		tg.mu.Lock()
		tg.reqs = append(tg.reqs, rec)
		tg.mu.Unlock()
		n := tg.count.Add(1)
		h(w, r, n, rec)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

// statusTarget answers every request with code and the given header pairs.
func statusTarget(t *testing.T, code int, kv ...string) *target {
	t.Helper()
	return newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Add(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	})
}

// URL is the target's base URL.
func (tg *target) URL() string { return tg.srv.URL }

// N is how many requests the target received.
func (tg *target) N() int64 { return tg.count.Load() }

// received returns a copy of every request seen so far.
func (tg *target) received() []received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]received(nil), tg.reqs...)
}

// newJob returns a pending job that POSTs a small JSON body to url, due
// now, with 3 attempts, a one-minute deadline and a 5 s attempt timeout.
func newJob(url string, mods ...func(j *store.Job)) *store.Job {
	now := time.Now()
	id := store.NewID()
	j := &store.Job{
		ID:          id,
		Key:         idemkey.New(),
		Fingerprint: "fp-" + id,
		State:       store.StatePending,
		Request: store.Request{
			Method: http.MethodPost,
			URL:    url + "/payments?currency=eur",
			Header: []store.HeaderField{
				{Name: "Content-Type", Value: "application/json"},
				{Name: "Authorization", Value: "Bearer sk_test_123"},
				{Name: "X-Trace", Value: "a"},
				{Name: "X-Trace", Value: "b"},
			},
			Body: []byte(`{"amount":1234,"to":"acct_1"}`),
		},
		MaxAttempts:    3,
		DeadlineAfter:  time.Minute,
		AttemptTimeout: 5 * time.Second,
		CreatedAt:      now,
		UpdatedAt:      now,
		NextRunAt:      now,
		Deadline:       now.Add(time.Minute),
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

// at moves a job's creation, due and deadline times to start.
func at(start time.Time) func(j *store.Job) {
	return func(j *store.Job) {
		j.CreatedAt, j.UpdatedAt, j.NextRunAt = start, start, start
		j.Deadline = start.Add(j.DeadlineAfter)
	}
}

// enqueue stores jobs and fails the test on any refusal.
func enqueue(t *testing.T, db *bolt.DB, jobs ...*store.Job) {
	t.Helper()
	for _, j := range jobs {
		res, err := db.Enqueue(context.Background(), j)
		if err != nil {
			t.Fatalf("Enqueue %s: %v", j.ID, err)
		}
		if res.Existing {
			t.Fatalf("Enqueue %s: unexpectedly existing", j.ID)
		}
	}
}

// getJob loads a job by id.
func getJob(t *testing.T, db *bolt.DB, id string) *store.Job {
	t.Helper()
	j, err := db.Get(id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return j
}

// testConfig is a fast, deterministic Config: tiny backoff, short quiet
// period and poll, UntilIdle, and a Doer whose idle connections are closed
// at cleanup.
func testConfig(t *testing.T) runner.Config {
	t.Helper()
	client := runner.NewHTTPClient(4)
	t.Cleanup(client.CloseIdleConnections)
	return runner.Config{
		Workers:       4,
		UntilIdle:     true,
		Doer:          client,
		Backoff:       runner.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		StatusBackoff: runner.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		QuietPeriod:   10 * time.Millisecond,
		Settle:        -1, // no window: the tests' targets show every create at once
		StartupSpread: time.Millisecond,
		PollInterval:  20 * time.Millisecond,
		ShutdownGrace: 200 * time.Millisecond,
		Rand:          runner.NewRand(1),
	}
}

// runIdle runs a runner with cfg (UntilIdle forced) until no job is
// pending, running or unknown, failing the test if that takes longer than
// runTimeout. It then checks that nothing is left running or due.
func runIdle(t *testing.T, db *bolt.DB, cfg runner.Config) {
	t.Helper()
	runIdleWithin(t, db, cfg, runTimeout)
}

// runIdleWithin is runIdle with its own time limit.
func runIdleWithin(t *testing.T, db *bolt.DB, cfg runner.Config, limit time.Duration) {
	t.Helper()
	cfg.UntilIdle = true
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := runner.New(db, cfg).Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run did not become idle within %s", limit)
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, s := range []store.State{store.StatePending, store.StateRunning, store.StateUnknown} {
		if st[s] != 0 {
			t.Errorf("after an idle Run, %d jobs are %s, want 0", st[s], s)
		}
	}
}

// runUntil runs a runner with cfg until stop returns true for a job the
// runner wrote (then it cancels Run and waits for it to return), failing
// the test after runTimeout. It returns the job that stopped the run.
func runUntil(t *testing.T, db runner.Store, cfg runner.Config, stop func(j *store.Job) bool) *store.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var (
		once sync.Once
		hit  = make(chan *store.Job, 1)
	)
	prev := cfg.OnWrite
	cfg.OnWrite = func(j *store.Job) {
		if prev != nil {
			prev(j)
		}
		if stop(j) {
			once.Do(func() { hit <- j })
		}
	}
	cfg.UntilIdle = false
	done := make(chan error, 1)
	go func() { done <- runner.New(db, cfg).Run(ctx) }()
	var got *store.Job
	select {
	case got = <-hit:
	case <-ctx.Done():
		t.Fatalf("runUntil: no matching write within %s", runTimeout)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return got
}

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(start time.Time) *fakeClock { return &fakeClock{now: start} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// clockStart is a fixed start for fake clocks: whole seconds, so HTTP-date
// Retry-After values computed from it are exact.
var clockStart = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// attempts returns the attempt events of a job's history.
func attempts(j *store.Job) []store.Event {
	var out []store.Event
	for _, e := range j.History {
		if e.Kind == store.EventAttempt {
			out = append(out, e)
		}
	}
	return out
}

// wantState fails the test unless j is in state s.
func wantState(t *testing.T, j *store.Job, s store.State) {
	t.Helper()
	if j.State != s {
		t.Fatalf("job state = %s (reason %q, last error %q), want %s", j.State, j.Reason, j.LastError, s)
	}
}

// wantContains fails the test unless s contains every sub.
func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s = %q, want it to contain %q", what, s, sub)
		}
	}
}

// parkedFor is what the reason of every job the runner parks for a person
// ends with. It says what is left to do in the store's terms; the CLI adds
// its resolve command where it shows the job.
const parkedFor = "then resolve the job as succeeded or failed"

// cliWords are the CLI's commands and flags, and the backquotes its
// commands are quoted in.
var cliWords = regexp.MustCompile("`|--[a-z]|idemrun (backup|bench|cancel|check|compact|demo|enqueue|list|resolve|retry|run|show|stats|watch)\\b")

// wantParkedReason checks that a needs_attention job's reason says a
// person must act and resolve the job, and names no CLI command or flag.
func wantParkedReason(t *testing.T, reason string, subs ...string) {
	t.Helper()
	wantContains(t, "reason", reason, append(subs, "a person must", parkedFor)...)
	if w := cliWords.FindString(reason); w != "" {
		t.Errorf("reason = %q names the CLI (%q); want the runner's own terms", reason, w)
	}
}

// hookStore is a *bolt.DB whose OldestDue calls a hook first (the
// scheduler calls OldestDue just before it sleeps).
type hookStore struct {
	*bolt.DB
	beforeOldestDue func()
}

func (h hookStore) OldestDue(s store.State) (time.Time, error) {
	if h.beforeOldestDue != nil {
		h.beforeOldestDue()
	}
	return h.DB.OldestDue(s)
}

// sameRequest reports how a received request differs from the first one,
// or "" when method, URI, headers and body are identical.
func sameRequest(a, b received) string {
	switch {
	case a.Method != b.Method:
		return "method " + a.Method + " vs " + b.Method
	case a.URI != b.URI:
		return "URI " + a.URI + " vs " + b.URI
	case a.Host != b.Host:
		return "host " + a.Host + " vs " + b.Host
	case !bytes.Equal(a.Body, b.Body):
		return "body " + string(a.Body) + " vs " + string(b.Body)
	}
	if len(a.Header) != len(b.Header) {
		return "header count differs"
	}
	for k, va := range a.Header {
		vb := b.Header[k]
		if strings.Join(va, "\x00") != strings.Join(vb, "\x00") {
			return "header " + k + ": " + strings.Join(va, ",") + " vs " + strings.Join(vb, ",")
		}
	}
	return ""
}

// errBoom is a refusal used by CheckSend tests.
var errBoom = errors.New("host not in allowlist")
