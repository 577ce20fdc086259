package runner_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// TestConnectionRefusedRetriedThenFailed: a refused connection never
// reached the server; it is retried up to the budget, then the job fails.
func TestConnectionRefusedRetriedThenFailed(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusOK)
	url := tg.URL()
	tg.srv.Close() // the port now refuses connections
	j := newJob(url)
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))

	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateFailed)
	if n := tg.N(); n != 0 {
		t.Errorf("target received %d requests, want 0", n)
	}
	if got.Attempts != j.MaxAttempts || got.MayHaveEffect {
		t.Errorf("attempts, may-have-effect = %d, %v, want %d, false", got.Attempts, got.MayHaveEffect, j.MaxAttempts)
	}
	wantContains(t, "reason", got.Reason, "3 attempts used", "connection refused")
	evs := attempts(got)
	if len(evs) != j.MaxAttempts {
		t.Fatalf("%d attempt events, want %d", len(evs), j.MaxAttempts)
	}
	for i, ev := range evs {
		if ev.Class != string(runner.ClassNoEffect) || ev.End.IsZero() {
			t.Errorf("attempt %d: class %q end %v, want a closed no_effect attempt", i+1, ev.Class, ev.End)
		}
	}
}

// blockingTarget answers nothing until release is closed or the client
// goes away. arrived receives once per request, after the body was read.
func blockingTarget(t *testing.T) (tg *target, arrived chan struct{}, release chan struct{}) {
	t.Helper()
	arrived = make(chan struct{}, 16)
	release = make(chan struct{})
	tg = newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		arrived <- struct{}{}
		select {
		case <-release:
			w.WriteHeader(http.StatusCreated)
		case <-r.Context().Done():
		}
	})
	// Registered after the server's Close, so it runs first and Close does
	// not wait for a blocked handler.
	t.Cleanup(func() { close(release) })
	return tg, arrived, release
}

// TestTransportOutcomes covers the rows of ARCHITECTURE.md §3 that end without an
// HTTP answer: after sending they are unknown (and, without a status URL
// or key TTL, parked after one request); a request Go refuses to send is
// permanent.
func TestTransportOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		target     func(t *testing.T) *target
		mod        func(j *store.Job)
		wantState  store.State
		wantClass  runner.Class
		wantN      int64
		wantReason []string
	}{
		{
			name:       "timeout after sending",
			target:     func(t *testing.T) *target { tg, _, _ := blockingTarget(t); return tg },
			mod:        func(j *store.Job) { j.AttemptTimeout = 100 * time.Millisecond },
			wantState:  store.StateNeedsAttention,
			wantClass:  runner.ClassUnknown,
			wantN:      1,
			wantReason: []string{"timed out after sending", "attempt timeout 100ms", "a person must", parkedFor},
		},
		{
			name: "reset after the request arrived",
			target: func(t *testing.T) *target {
				return newTarget(t, func(http.ResponseWriter, *http.Request, int64, received) {
					panic(http.ErrAbortHandler) // the work is done, the answer is lost
				})
			},
			wantState:  store.StateNeedsAttention,
			wantClass:  runner.ClassUnknown,
			wantN:      1,
			wantReason: []string{"after sending", "a person must", parkedFor},
		},
		{
			name:   "invalid header value",
			target: func(t *testing.T) *target { return statusTarget(t, http.StatusOK) },
			mod: func(j *store.Job) {
				j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "X-Bad", Value: "a\r\nX-Injected: 1"})
			},
			wantState:  store.StateFailed,
			wantClass:  runner.ClassPermanent,
			wantN:      0,
			wantReason: []string{"permanent", "invalid header field"},
		},
		{
			name:   "invalid header name",
			target: func(t *testing.T) *target { return statusTarget(t, http.StatusOK) },
			mod: func(j *store.Job) {
				j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "Bad Name", Value: "x"})
			},
			wantState:  store.StateFailed,
			wantClass:  runner.ClassPermanent,
			wantN:      0,
			wantReason: []string{"permanent", "invalid header field"},
		},
		{
			name:       "unsupported scheme",
			target:     func(t *testing.T) *target { return statusTarget(t, http.StatusOK) },
			mod:        func(j *store.Job) { j.Request.URL = "ftp://127.0.0.1:1/payments" },
			wantState:  store.StateFailed,
			wantClass:  runner.ClassPermanent,
			wantN:      0,
			wantReason: []string{"permanent", "unsupported protocol scheme"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := tt.target(t)
			var mods []func(*store.Job)
			if tt.mod != nil {
				mods = append(mods, tt.mod)
			}
			j := newJob(tg.URL(), mods...)
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, tt.wantState)
			if n := tg.N(); n != tt.wantN {
				t.Errorf("target received %d requests, want %d", n, tt.wantN)
			}
			if got.Attempts != 1 {
				t.Errorf("attempts = %d, want 1", got.Attempts)
			}
			if got.LastClass != string(tt.wantClass) {
				t.Errorf("last class = %q, want %q", got.LastClass, tt.wantClass)
			}
			if got.MayHaveEffect != (tt.wantClass == runner.ClassUnknown) {
				t.Errorf("may-have-effect = %v, want %v", got.MayHaveEffect, tt.wantClass == runner.ClassUnknown)
			}
			wantContains(t, "reason", got.Reason, tt.wantReason...)
			if w := cliWords.FindString(got.Reason); w != "" {
				t.Errorf("reason = %q names the CLI (%q); want the runner's own terms", got.Reason, w)
			}
		})
	}
}

// TestEveryAttemptSendsTheSameBytes: every attempt carries the same method,
// URL, headers (in order), body and Idempotency-Key, as the target saw them.
func TestEveryAttemptSendsTheSameBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code int
		mod  func(j *store.Job)
	}{
		{"503 declared no-effect", 503, func(j *store.Job) { j.NoEffectStatuses = []int{503} }},
		{"429", 429, func(*store.Job) {}},
		{"429 structured key, host header", 429, func(j *store.Job) {
			j.KeyFormat = "structured"
			j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "Host", Value: "payments.example"})
		}},
		{"429 empty body", 429, func(j *store.Job) { j.Request.Body = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, tt.code)
			j := newJob(tg.URL(), tt.mod)
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, store.StateFailed)
			rs := tg.received()
			if len(rs) != 3 || got.Attempts != 3 {
				t.Fatalf("target received %d requests, store has %d attempts, want 3 and 3", len(rs), got.Attempts)
			}
			first := rs[0]
			if first.Method != http.MethodPost || first.URI != "/payments?currency=eur" || !bytes.Equal(first.Body, j.Request.Body) {
				t.Errorf("first request %s %s %q, want POST /payments?currency=eur %q", first.Method, first.URI, first.Body, j.Request.Body)
			}
			wantKey := j.Key
			if j.KeyFormat == "structured" {
				wantKey = idemkey.FormatHeader(j.Key, idemkey.FormatStructured)
			}
			if k := first.Header.Values("Idempotency-Key"); len(k) != 1 || k[0] != wantKey {
				t.Errorf("Idempotency-Key = %q, want [%q]", k, wantKey)
			}
			if v := first.Header.Values("X-Trace"); len(v) != 2 || v[0] != "a" || v[1] != "b" {
				t.Errorf("X-Trace = %q, want [a b] in order", v)
			}
			if v := first.Header.Get("Authorization"); v != "Bearer sk_test_123" {
				t.Errorf("Authorization = %q, want the stored value", v)
			}
			if v := first.Header.Get("Accept-Encoding"); v != "" {
				t.Errorf("Accept-Encoding = %q, want none (the stored headers only)", v)
			}
			for i := 1; i < len(rs); i++ {
				if d := sameRequest(first, rs[i]); d != "" {
					t.Errorf("attempt %d differs from attempt 1: %s", i+1, d)
				}
			}
		})
	}
}

// connCounterKey is the context key of a server connection's own request
// counter.
type connCounterKey struct{}

// closingTarget answers the first request on each connection 503, and on a
// reused connection reads the whole request, counts it, and closes the
// connection without answering. That is exactly when net/http resends a
// request it believes replayable.
type closingTarget struct {
	srv      *httptest.Server
	received atomic.Int64 // requests read in full
	killed   atomic.Int64 // of those, closed without an answer
	conns    atomic.Int64 // connections accepted
}

func newClosingTarget(t *testing.T) *closingTarget {
	t.Helper()
	ct := &closingTarget{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		ct.received.Add(1)
		n := r.Context().Value(connCounterKey{}).(*atomic.Int64).Add(1)
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		ct.killed.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		conn.Close()
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		ct.conns.Add(1)
		return context.WithValue(ctx, connCounterKey{}, new(atomic.Int64))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ct.srv = srv
	return ct
}

// doStatus sends req with client and returns the status, the body read
// and closed.
func doStatus(client *http.Client, req *http.Request) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// warmClosingTarget opens client's one connection to ct with a request
// answered 503, and returns a POST body for the next requests.
func warmClosingTarget(t *testing.T, client *http.Client, ct *closingTarget) []byte {
	t.Helper()
	body := []byte(`{"amount":1}`)
	warm, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ct.srv.URL, bytes.NewReader(body))
	if code, err := doStatus(client, warm); err != nil || code != 503 {
		t.Fatalf("warm-up: %d, %v; want 503", code, err)
	}
	return body
}

// TestClosingTargetTriggersNetHTTPResend checks the test target itself: a
// request net/http considers replayable (GetBody set, Idempotency-Key
// header) is silently sent twice by one Client.Do, while the runner's
// request is sent once and fails.
func TestClosingTargetTriggersNetHTTPResend(t *testing.T) {
	t.Parallel()
	ct := newClosingTarget(t)
	client := runner.NewNetHTTPClient(1)
	t.Cleanup(client.CloseIdleConnections)
	ctx := context.Background()
	do := func(req *http.Request) (int, error) { return doStatus(client, req) }
	body := warmClosingTarget(t, client, ct)
	// A rewindable request with an Idempotency-Key: net/http resends it.
	before := ct.received.Load()
	plain, _ := http.NewRequestWithContext(ctx, http.MethodPost, ct.srv.URL, bytes.NewReader(body))
	plain.Header.Set("Idempotency-Key", idemkey.New())
	code, err := do(plain)
	if got := ct.received.Load() - before; got != 2 || err != nil || code != 503 {
		t.Fatalf("replayable request: target received %d, Do = %d, %v; want 2 received (hidden resend), 503", got, code, err)
	}
	// The runner's request on the now-warm connection: sent once, fails.
	before = ct.received.Load()
	j := newJob(ct.srv.URL)
	req, err := runner.BuildRequest(ctx, j)
	if err != nil {
		t.Fatalf("BuildRequest: %v", err)
	}
	if req.GetBody != nil {
		t.Errorf("BuildRequest set GetBody; net/http could rewind and resend it")
	}
	code, err = do(req)
	if got := ct.received.Load() - before; got != 1 || err == nil {
		t.Errorf("runner request: target received %d, Do = %d, %v; want 1 received and an error", got, code, err)
	}
}

// The runner's own transport never resends, not even a request net/http
// would count as replayable: on the same target as above, one Do is one
// request received.
func TestRunnerTransportNeverResends(t *testing.T) {
	t.Parallel()
	ct := newClosingTarget(t)
	client := runner.NewHTTPClient(1)
	t.Cleanup(client.CloseIdleConnections)
	body := warmClosingTarget(t, client, ct)
	before := ct.received.Load()
	replayable, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ct.srv.URL, bytes.NewReader(body))
	replayable.Header.Set("Idempotency-Key", idemkey.New())
	if replayable.GetBody == nil {
		t.Fatal("the request is not rewindable; the test proves nothing")
	}
	_, err := doStatus(client, replayable)
	if got := ct.received.Load() - before; got != 1 || err == nil {
		t.Errorf("replayable request through the runner's transport: target received %d, err %v; want 1 received and an error", got, err)
	}
	if c := ct.conns.Load(); c != 1 {
		t.Errorf("target accepted %d connections, want 1 (the warm one, reused, and no new one for a resend)", c)
	}
}

// TestNoHiddenResend: against a target that drops reused connections after
// reading the request, the target receives exactly the sends the store
// records: neither client resends a runner attempt on its own (P7).
func TestNoHiddenResend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		client func(int) *http.Client
	}{{"runner transport", runner.NewHTTPClient}, {"net/http transport", runner.NewNetHTTPClient}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testNoHiddenResend(t, tc.client)
		})
	}
}

func testNoHiddenResend(t *testing.T, client func(int) *http.Client) {
	db := openStore(t)
	ct := newClosingTarget(t)
	var jobs []*store.Job
	for i := range 12 {
		j := newJob(ct.srv.URL, func(j *store.Job) {
			j.NoEffectStatuses = []int{503}
			if i%3 == 0 {
				j.Request.Body = nil // an empty body goes out as NoBody; it must still not be replayable
			}
		})
		jobs = append(jobs, j)
	}
	enqueue(t, db, jobs...)
	cfg := testConfig(t)
	cfg.Workers = 2
	cfg.Doer = client(2)
	t.Cleanup(cfg.Doer.(*http.Client).CloseIdleConnections)
	runIdle(t, db, cfg)

	sent := 0
	states := map[store.State]int{}
	for _, j := range jobs {
		got := getJob(t, db, j.ID)
		sent += got.Attempts
		states[got.State]++
		if got.State == store.StateNeedsAttention && got.LastClass != string(runner.ClassUnknown) {
			t.Errorf("job %s: needs_attention with class %q, want unknown", got.ID, got.LastClass)
		}
	}
	if got := ct.received.Load(); got != int64(sent) {
		t.Errorf("target received %d requests, store records %d attempts; want equal (no hidden resend)", got, sent)
	}
	if ct.killed.Load() == 0 {
		t.Errorf("no request hit a reused connection; the test proved nothing (states %v)", states)
	}
	t.Logf("sent %d, killed %d, conns %d, states %v", sent, ct.killed.Load(), ct.conns.Load(), states)
}

// TestBuildRequestIsTheStoredRequest: BuildRequest reproduces the stored
// method, URL, headers and body, adds the key, and leaves no way to rewind.
func TestBuildRequestIsTheStoredRequest(t *testing.T) {
	t.Parallel()
	j := newJob("http://127.0.0.1:9")
	req, err := runner.BuildRequest(context.Background(), j)
	if err != nil {
		t.Fatalf("BuildRequest: %v", err)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	tests := []struct {
		what, got, want string
	}{
		{"method", req.Method, http.MethodPost},
		{"url", req.URL.String(), j.Request.URL},
		{"body", string(body), string(j.Request.Body)},
		{"key", req.Header.Get("Idempotency-Key"), j.Key},
		{"content type", req.Header.Get("Content-Type"), "application/json"},
		{"user agent", req.Header.Get("User-Agent"), "idemrun"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.what, tt.got, tt.want)
		}
	}
	if req.ContentLength != int64(len(j.Request.Body)) || req.GetBody != nil {
		t.Errorf("content length %d, GetBody set %v; want %d, false", req.ContentLength, req.GetBody != nil, len(j.Request.Body))
	}
}

// TestBodilessGETIsNotReplayable: a GET without a body is built so that
// net/http cannot resend it by itself.
func TestBodilessGETIsNotReplayable(t *testing.T) {
	t.Parallel()
	j := newJob("http://127.0.0.1:9", func(j *store.Job) {
		j.Request.Method = http.MethodGet
		j.Request.Body = nil
	})
	req, err := runner.BuildRequest(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		t.Errorf("GET body = %v, GetBody set = %v; want a non-rewindable body so net/http never resends", req.Body, req.GetBody != nil)
	}
	if req.Header.Get("Idempotency-Key") != j.Key {
		t.Errorf("Idempotency-Key = %q, want %q", req.Header.Get("Idempotency-Key"), j.Key)
	}
}

// TestSameKeyAcrossConcurrentJobs is a guard on the shared transport: many
// jobs at once each send only their own key.
func TestSameKeyAcrossConcurrentJobs(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusCreated)
	var jobs []*store.Job
	for range 20 {
		jobs = append(jobs, newJob(tg.URL()))
	}
	enqueue(t, db, jobs...)
	runIdle(t, db, testConfig(t))

	keys := map[string]int{}
	for _, r := range tg.received() {
		keys[r.Header.Get("Idempotency-Key")]++
	}
	for _, j := range jobs {
		if keys[j.Key] != 1 {
			t.Errorf("key %s sent %d times, want 1", j.Key, keys[j.Key])
		}
		wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	}
}
