package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// runTimeout bounds every Run in this package.
const runTimeout = 15 * time.Second

const (
	paymentsPath = "/payments"
	statusPrefix = "/payments/by-key/"
)

// openClient opens an api.Client on a fresh file. Its cleanup, registered
// first so it runs after every server of the test has stopped, checks the
// store's consistency and closes it.
func openClient(t *testing.T) *api.Client {
	t.Helper()
	c, err := api.Open(filepath.Join(t.TempDir(), "e.db"), &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatalf("api.Open: %v", err)
	}
	t.Cleanup(func() {
		rep, err := c.Check(context.Background())
		if err != nil {
			t.Errorf("store check: %v", err)
		} else if !rep.OK() {
			t.Errorf("store check found problems: %v", rep.Problems)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// baseConfig is the runner configuration of these tests: short quiet
// period, no settle window, fast backoffs, deterministic jitter, and an HTTP checker with a
// 300 ms timeout.
func baseConfig() runner.Config {
	return runner.Config{
		UntilIdle:   true,
		QuietPeriod: 50 * time.Millisecond,
		// The fake target's status endpoint shows a create in progress
		// ("processing"): "not found" needs no settle window.
		Settle:        -1,
		Backoff:       runner.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond},
		StatusBackoff: runner.Backoff{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
		StartupSpread: time.Millisecond,
		PollInterval:  20 * time.Millisecond,
		HTTPChecker:   &statusquery.HTTPChecker{Timeout: 300 * time.Millisecond},
		Rand:          runner.NewRand(1),
	}
}

// runUntilIdle runs a runner built from cfg until no job is pending, running
// or unknown, and fails the test when that takes longer than runTimeout.
func runUntilIdle(t *testing.T, c *api.Client, cfg runner.Config) {
	t.Helper()
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("runner did not go idle within %s", runTimeout)
	}
}

// enqueue stores one POST job of body to target with key k.
func enqueue(t *testing.T, c *api.Client, target string, body []byte, o api.EnqueueOptions) *api.Job {
	t.Helper()
	req := api.Request{
		Method: http.MethodPost,
		URL:    target,
		Header: []api.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Order", Value: o.Key}},
		Body:   body,
	}
	res, err := c.Enqueue(t.Context(), req, o)
	if err != nil {
		t.Fatalf("Enqueue(%q): %v", o.Key, err)
	}
	if res.Existing {
		t.Fatalf("Enqueue(%q): key already held by job %s", o.Key, res.Job.ID)
	}
	return res.Job
}

// jobByKey returns the stored job holding key.
func jobByKey(t *testing.T, c *api.Client, key string) *store.Job {
	t.Helper()
	j, err := c.Store().GetByKey(key)
	if err != nil {
		t.Fatalf("GetByKey(%q): %v", key, err)
	}
	return j
}

// eventsOf returns the job's history events of kind k, oldest first.
func eventsOf(j *store.Job, k store.EventKind) []store.Event {
	var out []store.Event
	for _, e := range j.History {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// outcomesOf lists the outcomes of the job's status queries, in order.
func outcomesOf(j *store.Job) []string {
	var out []string
	for _, e := range eventsOf(j, store.EventStatusQuery) {
		out = append(out, e.Outcome)
	}
	return out
}

// describe is a one-line summary of a job for failure messages.
func describe(j *store.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s attempts=%d status_queries=%d reason=%q", j.State, j.Attempts, j.StatusQueries, j.Reason)
	for _, e := range j.History {
		fmt.Fprintf(&b, "\n  %s n=%d class=%q status=%d outcome=%q detail=%q err=%q", e.Kind, e.N, e.Class, e.HTTPStatus, e.Outcome, e.Detail, e.Error)
	}
	return b.String()
}

// post is one POST as a target received it, recorded before any handling.
type post struct {
	key    string // the Idempotency-Key header as sent
	body   []byte
	header http.Header
}

// recorder keeps the POSTs and the status queries a target received.
type recorder struct {
	mu      sync.Mutex
	posts   []post
	queries map[string]int // status queries per key
}

// recordPost reads r's body, records the POST, puts the body back for the
// next handler, and returns the POST's arrival number (0-based).
func (rc *recorder) recordPost(r *http.Request) (int, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return 0, false // the request never fully arrived
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.posts = append(rc.posts, post{key: r.Header.Get(idemkey.HeaderName), body: body, header: r.Header.Clone()})
	return len(rc.posts) - 1, true
}

// recordQuery counts a status query and returns the key it asks about.
func (rc *recorder) recordQuery(r *http.Request) string {
	key, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), statusPrefix))
	if err != nil {
		key = "(invalid)"
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.queries == nil {
		rc.queries = make(map[string]int)
	}
	rc.queries[key]++
	return key
}

// postsFor returns the POSTs received with idempotency key k.
func (rc *recorder) postsFor(k string) []post {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []post
	for _, p := range rc.posts {
		if p.key == k {
			out = append(out, p)
		}
	}
	return out
}

// totalPosts is the number of POSTs received.
func (rc *recorder) totalPosts() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.posts)
}

// queriesFor is the number of status queries received for key k.
func (rc *recorder) queriesFor(k string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.queries[k]
}

// checkSameRequest fails the test unless every POST carries key k, body
// want and the job's own headers, byte for byte.
func checkSameRequest(t *testing.T, posts []post, k string, want []byte) {
	t.Helper()
	for i, p := range posts {
		if p.key != k {
			t.Errorf("POST %d: Idempotency-Key = %q, want %q", i+1, p.key, k)
		}
		if !bytes.Equal(p.body, want) {
			t.Errorf("POST %d: body = %q, want %q", i+1, p.body, want)
		}
		if got := p.header.Get("X-Order"); got != k {
			t.Errorf("POST %d: X-Order = %q, want %q", i+1, got, k)
		}
		if got := p.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("POST %d: Content-Type = %q, want %q", i+1, got, "application/json")
		}
	}
}

// fakeTarget serves a faketarget.Server through httptest on 127.0.0.1,
// recording every POST and status query before the fake sees it. With a
// script, the n-th POST (0-based, by arrival) runs with script[n] as its
// faults and later POSTs with the Config's faults; scripted POSTs are
// handled one at a time so a fault cannot leak onto another request.
type fakeTarget struct {
	recorder
	fake *faketarget.Server
	srv  *httptest.Server

	script []faketarget.Faults
	after  faketarget.Faults
	postMu sync.Mutex // serializes scripted POSTs
}

// newFakeTarget starts a fake target. Cleanup closes the fake (releasing
// hanging handlers and abandoning slow commits) before the HTTP server.
func newFakeTarget(t *testing.T, cfg faketarget.Config, script ...faketarget.Faults) *fakeTarget {
	t.Helper()
	ft := &fakeTarget{fake: faketarget.New(cfg), script: script, after: cfg.Faults}
	ft.srv = httptest.NewServer(http.HandlerFunc(ft.serve))
	t.Cleanup(ft.srv.Close)
	t.Cleanup(func() {
		if err := ft.fake.Close(); err != nil {
			t.Errorf("fake target close: %v", err)
		}
	})
	return ft
}

func (ft *fakeTarget) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodPost && path == paymentsPath:
		if len(ft.script) > 0 {
			ft.postMu.Lock()
			defer ft.postMu.Unlock()
		}
		n, ok := ft.recordPost(r)
		if !ok {
			return
		}
		if len(ft.script) > 0 {
			f := ft.after
			if n < len(ft.script) {
				f = ft.script[n]
			}
			ft.fake.SetFaults(f)
		}
	case r.Method == http.MethodGet && strings.HasPrefix(path, statusPrefix):
		ft.recordQuery(r)
	}
	ft.fake.Handler().ServeHTTP(w, r)
}

// PaymentsURL is the create endpoint.
func (ft *fakeTarget) PaymentsURL() string { return ft.srv.URL + paymentsPath }

// StatusTemplate is the status URL template of the fake.
func (ft *fakeTarget) StatusTemplate() string { return ft.srv.URL + statusPrefix + "{key}" }

// postStep is what a scriptTarget does with one POST.
type postStep int

const (
	create201      postStep = iota // create and answer 201
	answer409                      // answer 409 "in progress", create nothing
	fail500                        // answer 500, create nothing
	createThenDrop                 // create, then drop the connection unanswered
	dropNoCreate                   // drop the connection unanswered, create nothing
)

// statusStep is what a scriptTarget does with one status query.
type statusStep int

const (
	truth           statusStep = iota // 404, the payment, or {"data":[...]} for several
	processing                        // 200 {"status":"processing"}
	createThenTruth                   // create a payment (an earlier request finishing), then truth
)

// scriptTarget is a payments target that follows a script of POST and
// status answers, past which it creates on POST and tells the truth on
// status. It creates at most what its script says, so creates per key are
// the ground truth.
type scriptTarget struct {
	recorder
	srv *httptest.Server

	posts    []postStep
	statuses []statusStep

	smu      sync.Mutex
	nPost    int
	nStatus  int
	created  map[string]int
	payments int
}

// newScriptTarget starts a scriptTarget on 127.0.0.1.
func newScriptTarget(t *testing.T, posts []postStep, statuses []statusStep) *scriptTarget {
	t.Helper()
	st := &scriptTarget{posts: posts, statuses: statuses, created: make(map[string]int)}
	st.srv = httptest.NewServer(http.HandlerFunc(st.serve))
	t.Cleanup(st.srv.Close)
	return st
}

// PaymentsURL is the create endpoint.
func (st *scriptTarget) PaymentsURL() string { return st.srv.URL + paymentsPath }

// StatusTemplate is the status URL template.
func (st *scriptTarget) StatusTemplate() string { return st.srv.URL + statusPrefix + "{key}" }

// Creates is the number of payments created for key.
func (st *scriptTarget) Creates(key string) int {
	st.smu.Lock()
	defer st.smu.Unlock()
	return st.created[key]
}

func (st *scriptTarget) createLocked(key string) string {
	st.created[key]++
	st.payments++
	return fmt.Sprintf("pay_%d", st.payments)
}

func (st *scriptTarget) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodPost && path == paymentsPath:
		if _, ok := st.recordPost(r); !ok {
			return
		}
		st.create(w, r.Header.Get(idemkey.HeaderName))
	case r.Method == http.MethodGet && strings.HasPrefix(path, statusPrefix):
		st.status(w, st.recordQuery(r))
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}
}

func (st *scriptTarget) create(w http.ResponseWriter, key string) {
	st.smu.Lock()
	step := create201
	if st.nPost < len(st.posts) {
		step = st.posts[st.nPost]
	}
	st.nPost++
	var id string
	if step == create201 || step == createThenDrop {
		id = st.createLocked(key)
	}
	st.smu.Unlock()
	switch step {
	case answer409:
		writeJSON(w, http.StatusConflict, map[string]string{"error": "a request with this key is in progress"})
	case fail500:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
	case createThenDrop, dropNoCreate:
		panic(http.ErrAbortHandler) // no answer at all: the client sees the connection close
	default:
		writeJSON(w, http.StatusCreated, map[string]string{"id": id, "key": key, "status": "succeeded"})
	}
}

func (st *scriptTarget) status(w http.ResponseWriter, key string) {
	st.smu.Lock()
	step := truth
	if st.nStatus < len(st.statuses) {
		step = st.statuses[st.nStatus]
	}
	st.nStatus++
	if step == processing {
		st.smu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"key": key, "status": "processing"})
		return
	}
	if step == createThenTruth {
		st.createLocked(key)
	}
	n := st.created[key]
	st.smu.Unlock()
	switch {
	case n == 0:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	case n == 1:
		writeJSON(w, http.StatusOK, map[string]string{"key": key, "status": "succeeded"})
	default:
		items := make([]map[string]string, n)
		for i := range items {
			items[i] = map[string]string{"key": key, "status": "succeeded"}
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": items})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
