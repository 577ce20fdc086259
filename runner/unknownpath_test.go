package runner_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// TestRetryAfterOverCapWhileUnknownStopsNow: ARCHITECTURE.md §4 says a Retry-After over the
// job's cap stops the job now with the last error, on the status-query path
// too (a 503 or a 409 with Retry-After, job with a status URL): the attempt
// may have taken effect, so the job goes to needs_attention instead of
// waiting a day or a century in unknown.
func TestRetryAfterOverCapWhileUnknownStopsNow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, retryAfter string
		code             int
	}{
		{"503 one day", "86400", http.StatusServiceUnavailable},
		{"503 huge", "99999999999999999999", http.StatusServiceUnavailable},
		{"409 one day", "86400", http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			var posts, queries atomic.Int64
			tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
				if r.Method == http.MethodGet {
					queries.Add(1)
					w.WriteHeader(http.StatusNotFound)
					return
				}
				posts.Add(1)
				w.Header().Set("Retry-After", tc.retryAfter)
				w.WriteHeader(tc.code)
			})
			j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/status/{key}" })
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.RetryAfterCap = time.Minute
			got := runUntil(t, db, cfg, func(j *store.Job) bool { return j.State != store.StateRunning })

			if got.State != store.StateNeedsAttention {
				t.Errorf("after %d %s with Retry-After %s (cap 1m): state %s, next_run_at in %s; want needs_attention now (ARCHITECTURE.md §4: over the cap, stop now)",
					tc.code, http.StatusText(tc.code), tc.retryAfter, got.State, time.Until(got.NextRunAt).Round(time.Hour))
			}
			if limit := got.Deadline.Add(time.Hour); got.State == store.StateUnknown && got.NextRunAt.After(limit) {
				t.Errorf("next status query at %s, after deadline+grace %s: the job can never end", got.NextRunAt.UTC(), limit.UTC())
			}
			if n := posts.Load(); n != 1 {
				t.Errorf("POSTs = %d, want 1", n)
			}
		})
	}
}

// runStatusJob works one POST job with a status URL (/status/{key}) and a
// status budget of 2 against a target answering with h, and returns it as
// it ended.
func runStatusJob(t *testing.T, h func(http.ResponseWriter, *http.Request, int64, received)) *store.Job {
	t.Helper()
	db := openStore(t)
	tg := newTarget(t, h)
	j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/status/{key}" })
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.StatusBudget = 2
	runIdle(t, db, cfg)
	return getJob(t, db, j.ID)
}

// TestStatusAnswerSayingNotFoundIsNotSuccess: P6. A status endpoint that
// answers 200 with a body saying the operation does not exist must not end
// the job succeeded: the target created nothing.
func TestStatusAnswerSayingNotFoundIsNotSuccess(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"status":"not_found"}`,
		`{"data":null}`, // Go: a nil slice marshals as null
		`null`,
	} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			got := runStatusJob(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
				if r.Method == http.MethodGet {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, body)
					return
				}
				// A gateway error before the upstream did anything: the
				// runner rightly cannot tell, so it asks the status endpoint.
				w.WriteHeader(http.StatusBadGateway)
			})
			if got.State == store.StateSucceeded {
				t.Errorf("status answer %s: job ended succeeded (reason %q) with nothing created at the target; want not succeeded (P6)",
					body, got.Reason)
			}
		})
	}
}

// TestGateway404HTMLIsNotNotFound: P4. A proxy in front of the status
// endpoint answering its own 404 HTML page (no route / upstream not
// deployed) is not the status API saying "no such operation": no replay, so
// a target that did the work the first time (and does not deduplicate)
// holds one payment.
func TestGateway404HTMLIsNotNotFound(t *testing.T) {
	t.Parallel()
	var creates atomic.Int64
	got := runStatusJob(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		if strings.HasPrefix(r.URL.Path, "/status/") {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>")
			return
		}
		if creates.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway) // created, answer lost at the gateway
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	if n := creates.Load(); n != 1 {
		t.Errorf("creates at the target = %d, want 1 (replayed on a gateway's HTML 404); state %s", n, got.State)
	}
}

// TestStatusListItemForAnotherKey: P6. A list endpoint that ignores its
// filter (…/payments?idempotency_key={key} on a target that does not know
// the parameter) returns some other operation. Its "failed" is not this
// job's: the job must not end failed (which a person may then `retry`)
// while its own attempt created a payment.
func TestStatusListItemForAnotherKey(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	var creates atomic.Int64
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":[{"id":"pay_7","idempotency_key":"someone-else","status":"failed"}]}`)
			return
		}
		creates.Add(1)
		w.WriteHeader(http.StatusBadGateway) // created; the answer was lost
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/payments?idempotency_key={key}" })
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))

	got := getJob(t, db, j.ID)
	if got.State == store.StateFailed && creates.Load() > 0 {
		t.Errorf("job ended failed (reason %q, may_have_effect %v) though its attempt created %d payment(s); the listed item names another key",
			got.Reason, got.MayHaveEffect, creates.Load())
	}
}

// TestCustomCheckerGetsATimeout: a custom checker that never answers is
// canceled after QueryTimeout and counts as no answer.
func TestCustomCheckerGetsATimeout(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusBadGateway)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.StatusBudget = 2
	cfg.QueryTimeout = 50 * time.Millisecond
	cfg.Checker = statusquery.CheckerFunc(func(ctx context.Context, q statusquery.Query) statusquery.Answer {
		<-ctx.Done()
		return statusquery.Answer{Outcome: statusquery.NoAnswer, Detail: "hung", Err: ctx.Err()}
	})
	runIdleWithin(t, db, cfg, 10*time.Second)
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateNeedsAttention)
	wantContains(t, "reason", got.Reason, "status budget")
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d sends, want 1", n)
	}
}
