package runner_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// TestSucceeds2xx: a 2xx answer ends the job succeeded after exactly one
// request, with the answer kept as the result.
func TestSucceeds2xx(t *testing.T) {
	t.Parallel()
	for _, code := range []int{200, 201, 202, 204} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, code)
			j := newJob(tg.URL())
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, store.StateSucceeded)
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
			if got.Attempts != 1 || got.MayHaveEffect {
				t.Errorf("attempts, may-have-effect = %d, %v, want 1, false", got.Attempts, got.MayHaveEffect)
			}
			if got.Result == nil || got.Result.HTTPStatus != code || got.Result.Source != "attempt" || got.Result.Truncated {
				t.Fatalf("result = %+v, want status %d from the attempt, not truncated", got.Result, code)
			}
			wantBody := http.StatusText(code)
			if code == 204 {
				wantBody = "" // a 204 carries no body
			}
			if string(got.Result.Body) != wantBody {
				t.Errorf("result body = %q, want %q", got.Result.Body, wantBody)
			}
			evs := attempts(got)
			if len(evs) != 1 || evs[0].Class != string(runner.ClassSucceeded) || evs[0].HTTPStatus != code || evs[0].End.IsZero() {
				t.Errorf("attempt events = %+v, want one closed succeeded event with status %d", evs, code)
			}
		})
	}
}

// TestSucceededBodyOverCap: a 2xx body over BodyLimit is still a success,
// kept truncated, and never replayed.
func TestSucceededBodyOverCap(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	big := strings.Repeat("0123456789", 1000)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, big)
	})
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.BodyLimit = 64
	runIdle(t, db, cfg)

	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d requests, want 1", n)
	}
	if got.Result == nil || !got.Result.Truncated || string(got.Result.Body) != big[:64] {
		t.Fatalf("result = %+v, want truncated to the first 64 bytes", got.Result)
	}
	if ev := got.LastEvent(store.EventAttempt); ev == nil || !ev.Truncated {
		t.Errorf("attempt event = %+v, want Truncated", ev)
	}
}

// TestHugeBodyLimitKeepsTheBody: a BodyLimit of math.MaxInt64 is taken as
// MaxBodyLimit; the limit plus one used to overflow, and the answer's body
// was kept empty and not marked truncated.
func TestHugeBodyLimitKeepsTheBody(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"pay_1"}`)
	})
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.BodyLimit = math.MaxInt64
	runIdle(t, db, cfg)
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	if got.Result == nil || got.Result.Truncated || string(got.Result.Body) != `{"id":"pay_1"}` {
		t.Fatalf("result = %+v, want the whole body", got.Result)
	}
}

// TestRedirectNotFollowed: a 3xx is permanent; the redirect target is never
// contacted. A 303 See Other after a POST points to the result of work the
// server did, so that job ends needs_attention, not failed (P6).
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			elsewhere := statusTarget(t, http.StatusOK)
			tg := statusTarget(t, code, "Location", elsewhere.URL()+"/moved")
			j := newJob(tg.URL())
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			if code == http.StatusSeeOther {
				wantState(t, got, store.StateNeedsAttention)
			} else {
				wantState(t, got, store.StateFailed)
			}
			wantContains(t, "reason", got.Reason, "redirect not followed")
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
			if n := elsewhere.N(); n != 0 {
				t.Errorf("redirect target received %d requests, want 0", n)
			}
			if got.LastStatus != code || got.LastClass != string(runner.ClassPermanent) {
				t.Errorf("last status, class = %d, %s, want %d, permanent", got.LastStatus, got.LastClass, code)
			}
		})
	}
}

// TestNoEffectStatusesRetried: 408, 425 and 429 are retried with the same
// key until the attempt budget is spent, then the job fails.
func TestNoEffectStatusesRetried(t *testing.T) {
	t.Parallel()
	for _, code := range []int{408, 425, 429} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, code)
			j := newJob(tg.URL(), func(j *store.Job) { j.MaxAttempts = 4 })
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, store.StateFailed)
			if n := tg.N(); n != 4 {
				t.Errorf("target received %d requests, want MaxAttempts = 4", n)
			}
			if got.Attempts != 4 || got.MayHaveEffect {
				t.Errorf("attempts, may-have-effect = %d, %v, want 4, false", got.Attempts, got.MayHaveEffect)
			}
			wantContains(t, "reason", got.Reason, "4 attempts used", fmt.Sprint(code))
			for i, ev := range attempts(got) {
				if ev.Class != string(runner.ClassNoEffect) || ev.HTTPStatus != code {
					t.Errorf("attempt %d: class %s status %d, want no_effect %d", i+1, ev.Class, ev.HTTPStatus, code)
				}
			}
			for i, r := range tg.received() {
				if k := r.Header.Get("Idempotency-Key"); k != j.Key {
					t.Errorf("request %d: Idempotency-Key %q, want %q", i+1, k, j.Key)
				}
			}
		})
	}
}

// TestInProgress409QueriesStatus: a 409 makes the job unknown and queried;
// the 409 send does not count against the attempt budget.
func TestInProgress409QueriesStatus(t *testing.T) {
	t.Parallel()
	t.Run("found", func(t *testing.T) {
		t.Parallel()
		db := openStore(t)
		tg := statusTarget(t, http.StatusConflict)
		j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/payments/by-key/{key}" })
		enqueue(t, db, j)
		var queries atomic.Int64
		cfg := testConfig(t)
		cfg.Checker = statusquery.CheckerFunc(func(_ context.Context, q statusquery.Query) statusquery.Answer {
			queries.Add(1)
			if q.Key != j.Key || q.JobID != j.ID {
				return statusquery.Answer{Outcome: statusquery.NoAnswer, Detail: "wrong query"}
			}
			return statusquery.Answer{Outcome: statusquery.FoundSucceeded, HTTPStatus: 200, Body: []byte(`{"status":"succeeded"}`), Detail: "found"}
		})
		runIdle(t, db, cfg)

		got := getJob(t, db, j.ID)
		wantState(t, got, store.StateSucceeded)
		if n := tg.N(); n != 1 {
			t.Errorf("target received %d requests, want 1", n)
		}
		if n := queries.Load(); n != 1 {
			t.Errorf("checker asked %d times, want 1", n)
		}
		if got.Attempts != 1 || got.AttemptsLeft() != j.MaxAttempts {
			t.Errorf("attempts %d, left %d, want 1 sent and the full budget %d left", got.Attempts, got.AttemptsLeft(), j.MaxAttempts)
		}
		if got.Result == nil || got.Result.Source != "status_query" {
			t.Errorf("result = %+v, want the status query's", got.Result)
		}
		if ev := got.LastEvent(store.EventAttempt); ev == nil || ev.Class != string(runner.ClassInProgress) || ev.HTTPStatus != 409 {
			t.Errorf("attempt event = %+v, want in_progress 409", ev)
		}
		if ev := got.LastEvent(store.EventStatusQuery); ev == nil || ev.Outcome != string(statusquery.FoundSucceeded) {
			t.Errorf("status query event = %+v, want found_succeeded", ev)
		}
	})
	t.Run("not found replays within a one-attempt budget", func(t *testing.T) {
		t.Parallel()
		db := openStore(t)
		tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, n int64, _ received) {
			if n == 1 {
				w.WriteHeader(http.StatusConflict)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		// MaxAttempts 1: if the 409 counted, "not found" would end the job
		// failed instead of replaying it.
		j := newJob(tg.URL(), func(j *store.Job) { j.MaxAttempts = 1 })
		enqueue(t, db, j)
		cfg := testConfig(t)
		cfg.Checker = statusquery.CheckerFunc(func(context.Context, statusquery.Query) statusquery.Answer {
			return statusquery.Answer{Outcome: statusquery.NotFound, HTTPStatus: 404, Detail: "404 not found"}
		})
		runIdle(t, db, cfg)

		got := getJob(t, db, j.ID)
		wantState(t, got, store.StateSucceeded)
		if n := tg.N(); n != 2 {
			t.Errorf("target received %d requests, want 2 (409, then the replay)", n)
		}
		for i, r := range tg.received() {
			if k := r.Header.Get("Idempotency-Key"); k != j.Key {
				t.Errorf("request %d: Idempotency-Key %q, want %q", i+1, k, j.Key)
			}
		}
	})
}

// TestInProgress409BackoffGrows: without a way to query status, a target
// answering 409 again and again is retried with a growing delay, not
// hammered at the base delay until the deadline. The stored delays of the
// first five attempts must climb above the base (seeded rand: with
// ceilings 10, 20, 40, 80 ms all four draws staying ≤ 10 ms has odds of
// 1 in 1024, and the seed fixes the draws).
func TestInProgress409BackoffGrows(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusConflict)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	base := 10 * time.Millisecond
	cfg.Backoff = runner.Backoff{Base: base, Cap: time.Second}
	got := runUntil(t, db, cfg, func(j *store.Job) bool { return j.Attempts >= 5 && j.State != store.StateRunning })

	wantState(t, got, store.StatePending)
	var longest time.Duration
	for _, ev := range attempts(got) {
		if ev.Class != string(runner.ClassInProgress) || ev.DelayReason != "backoff" {
			t.Errorf("attempt %d: class %q, delay reason %q, want in_progress, backoff", ev.N, ev.Class, ev.DelayReason)
		}
		longest = max(longest, ev.Delay)
	}
	if longest <= base {
		t.Errorf("longest delay over %d 409 answers = %s, want it to grow past the base %s", got.Attempts, longest, base)
	}
	if n := tg.N(); n != int64(got.Attempts) {
		t.Errorf("target received %d requests, store records %d attempts", n, got.Attempts)
	}
}

// TestKeyMismatch422: a 422 parks the job for a person after one request.
func TestKeyMismatch422(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusUnprocessableEntity)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))

	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateNeedsAttention)
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d requests, want 1", n)
	}
	wantParkedReason(t, got.Reason, "key mismatch")
}

// TestServerErrorsNeedAttention: 500, 502, 503 and 504 may follow work the
// server did; without a status URL or key TTL the job is parked after one
// request, never replayed.
func TestServerErrorsNeedAttention(t *testing.T) {
	t.Parallel()
	for _, code := range []int{500, 502, 503, 504} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, code)
			j := newJob(tg.URL())
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, store.StateNeedsAttention)
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
			if !got.MayHaveEffect || got.LastClass != string(runner.ClassUnknown) || got.LastStatus != code {
				t.Errorf("may-have-effect, class, status = %v, %s, %d, want true, unknown, %d", got.MayHaveEffect, got.LastClass, got.LastStatus, code)
			}
			wantParkedReason(t, got.Reason)
		})
	}
}

// TestPermanent4xx: other 4xx answers fail the job after one request.
func TestPermanent4xx(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 405, 410, 413, 415} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, code)
			j := newJob(tg.URL())
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, store.StateFailed)
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
			if got.LastStatus != code || got.LastClass != string(runner.ClassPermanent) || got.MayHaveEffect {
				t.Errorf("status, class, may-have-effect = %d, %s, %v, want %d, permanent, false", got.LastStatus, got.LastClass, got.MayHaveEffect, code)
			}
			wantContains(t, "reason", got.Reason, "permanent", fmt.Sprint(code))
			if got.Result == nil || got.Result.HTTPStatus != code {
				t.Errorf("result = %+v, want the %d answer recorded", got.Result, code)
			}
		})
	}
}

// TestServerErrorWithStatusURL: after a 5xx the default HTTP checker asks
// the job's status URL; "found" ends it succeeded without a resend, "not
// found" replays the same key once.
func TestServerErrorWithStatusURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      func(w http.ResponseWriter)
		wantState   store.State
		wantPosts   int64
		wantQueries int64
	}{
		{"found", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"pay_1","status":"succeeded"}`)
		}, store.StateSucceeded, 1, 1},
		{"not found", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) }, store.StateSucceeded, 2, 1},
		{"found failed", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, `{"id":"pay_1","status":"declined"}`)
		}, store.StateFailed, 1, 1},
		{"duplicate", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, `{"data":[{"id":"pay_1"},{"id":"pay_2"}]}`)
		}, store.StateNeedsAttention, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			var posts, queries atomic.Int64
			var key atomic.Value
			tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
				if r.Method == http.MethodGet {
					queries.Add(1)
					if k := strings.TrimPrefix(r.URL.Path, "/status/"); k != key.Load() {
						w.WriteHeader(http.StatusBadRequest)
						return
					}
					tt.status(w)
					return
				}
				if posts.Add(1) == 1 {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/status/{key}" })
			key.Store(j.Key)
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, tt.wantState)
			if n := posts.Load(); n != tt.wantPosts {
				t.Errorf("target received %d POSTs, want %d", n, tt.wantPosts)
			}
			if n := queries.Load(); n != tt.wantQueries {
				t.Errorf("target received %d status queries, want %d", n, tt.wantQueries)
			}
		})
	}
}

// TestServerErrorReplayInsideKeyTTL: without a status URL, an unknown
// outcome is replayed with the same key only inside the key TTL (minus the
// margin).
func TestServerErrorReplayInsideKeyTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ttl       time.Duration
		wantState store.State
		wantPosts int64
	}{
		{"inside ttl", time.Hour, store.StateSucceeded, 2},
		{"ttl shorter than margin", 30 * time.Second, store.StateNeedsAttention, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, n int64, _ received) {
				if n == 1 {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			j := newJob(tg.URL(), func(j *store.Job) { j.KeyTTL = tt.ttl })
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			got := getJob(t, db, j.ID)
			wantState(t, got, tt.wantState)
			if n := tg.N(); n != tt.wantPosts {
				t.Errorf("target received %d requests, want %d", n, tt.wantPosts)
			}
			rs := tg.received()
			for i := 1; i < len(rs); i++ {
				if d := sameRequest(rs[0], rs[i]); d != "" {
					t.Errorf("replay %d differs from the first send: %s", i, d)
				}
			}
		})
	}
}

// TestLateReplayPastKeyTTLNotSent: a replay that relies on the target's key
// TTL but comes due after the window closed (the runner was down, say) is
// not sent; the job goes to a person.
func TestLateReplayPastKeyTTLNotSent(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusCreated)
	j := newJob(tg.URL(), func(j *store.Job) {
		j.KeyTTL = time.Hour
		j.MayHaveEffect = true // an earlier attempt's outcome is unknown
		j.Attempts = 1
		j.FirstSentAt = time.Now().Add(-2 * time.Hour)
	})
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateNeedsAttention)
	wantContains(t, "reason", got.Reason, "key TTL window")
	if n := tg.N(); n != 0 {
		t.Errorf("target received %d requests after the key TTL window closed, want 0", n)
	}
}

// TestRetryAfterFloor: a 503 the job declared no-effect, with Retry-After,
// schedules the next attempt no earlier than the attempt's end plus the
// server's wait (fake clock).
func TestRetryAfterFloor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter func(end time.Time) string
		wantDelay  time.Duration
	}{
		{"seconds", func(time.Time) string { return "2" }, 2 * time.Second},
		{"http date", func(end time.Time) string { return end.Add(5 * time.Second).Format(http.TimeFormat) }, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			clock := newFakeClock(clockStart)
			tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
				clock.Advance(time.Second) // the attempt takes a (fake) second
				w.Header().Set("Retry-After", tt.retryAfter(clock.Now()))
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			j := newJob(tg.URL(), at(clockStart), func(j *store.Job) { j.NoEffectStatuses = []int{503} })
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.Now = clock.Now
			got := runUntil(t, db, cfg, func(j *store.Job) bool { return j.State != store.StateRunning })

			wantState(t, got, store.StatePending)
			stored := getJob(t, db, j.ID)
			ev := stored.LastEvent(store.EventAttempt)
			if ev == nil || ev.End.IsZero() {
				t.Fatalf("attempt event = %+v, want a closed attempt", ev)
			}
			if gap := stored.NextRunAt.Sub(ev.End); gap < tt.wantDelay {
				t.Errorf("next_run_at - attempt end = %s, want ≥ %s", gap, tt.wantDelay)
			}
			if ev.DelayReason != "retry-after" || ev.Delay != tt.wantDelay {
				t.Errorf("delay, reason = %s, %q, want %s, retry-after", ev.Delay, ev.DelayReason, tt.wantDelay)
			}
			if !ev.End.Equal(clockStart.Add(time.Second)) {
				t.Errorf("attempt end = %s, want the fake clock's %s", ev.End, clockStart.Add(time.Second))
			}
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
		})
	}
}

// TestRetryAfterIsAFloorForKeyTTLReplays: a 503 with Retry-After on a job
// that replays inside its key TTL waits at least that long.
func TestRetryAfterIsAFloorForKeyTTLReplays(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, n int64, _ received) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.KeyTTL = time.Hour })
	enqueue(t, db, j)
	runIdleWithin(t, db, testConfig(t), 10*time.Second)
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	at := attempts(got)
	if len(at) != 2 {
		t.Fatalf("attempts = %d, want 2", len(at))
	}
	if gap := at[1].Start.Sub(at[0].End); gap < time.Second {
		t.Errorf("replay %s after a Retry-After: 1 answer, want at least 1s", gap)
	}
}

// TestRetryAfterStopsNow: a Retry-After over the cap, or past the job's
// deadline, stops the job now with the last error; the runner never
// shortens the server's wait.
func TestRetryAfterStopsNow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		code       int
		retryAfter string
		raCap      time.Duration
		deadline   time.Duration
		wantReason []string
	}{
		{"over cap 503 no-effect", 503, "600", time.Minute, time.Hour, []string{"over the cap", "last error", "503"}},
		{"over cap 429", 429, "3600", 5 * time.Minute, 24 * time.Hour, []string{"over the cap", "last error", "429"}},
		{"past deadline", 429, "30", 5 * time.Minute, 10 * time.Second, []string{"would pass the deadline", "retry-after", "last error", "429"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, tt.code, "Retry-After", tt.retryAfter)
			j := newJob(tg.URL(), func(j *store.Job) {
				j.NoEffectStatuses = []int{503}
				j.DeadlineAfter = tt.deadline
				j.Deadline = j.CreatedAt.Add(tt.deadline)
			})
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.RetryAfterCap = tt.raCap
			runIdle(t, db, cfg)

			got := getJob(t, db, j.ID)
			wantState(t, got, store.StateFailed)
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
			wantContains(t, "reason", got.Reason, tt.wantReason...)
		})
	}
}

// TestDeadlineShorterThanBackoff: when the next backoff would land past the
// deadline the job stops now with the last error in its reason; with a
// later deadline the same draw schedules a retry. The delay is known in
// advance: same seed, same first draw.
func TestDeadlineShorterThanBackoff(t *testing.T) {
	t.Parallel()
	const seed = 7
	b := runner.Backoff{Base: 10 * time.Second, Cap: 10 * time.Second}
	delay := b.Delay(1, runner.NewRand(seed))
	if delay < 2*time.Second {
		t.Fatalf("seed %d draws %s; pick a seed that draws at least 2s", seed, delay)
	}
	tests := []struct {
		name      string
		deadline  time.Duration
		wantState store.State
	}{
		{"deadline before the retry", delay / 2, store.StateFailed},
		{"deadline after the retry", delay + time.Second, store.StatePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := statusTarget(t, http.StatusTooManyRequests)
			clock := newFakeClock(clockStart)
			j := newJob(tg.URL(), func(j *store.Job) { j.DeadlineAfter = tt.deadline }, at(clockStart))
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.Now = clock.Now
			cfg.Backoff = b
			cfg.Rand = runner.NewRand(seed)
			got := runUntil(t, db, cfg, func(j *store.Job) bool { return j.State != store.StateRunning })

			wantState(t, got, tt.wantState)
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
			switch tt.wantState {
			case store.StateFailed:
				wantContains(t, "reason", got.Reason, "would pass the deadline", "last error: "+got.LastError)
				wantContains(t, "last error", got.LastError, "429")
			case store.StatePending:
				if want := clockStart.Add(delay); !got.NextRunAt.Equal(want) {
					t.Errorf("next_run_at = %s, want %s", got.NextRunAt, want)
				}
			}
		})
	}
}

// TestCheckSendRefusalAfterUnknownIsHonest: when a replay inside the key
// TTL is refused before sending, an earlier attempt may still have taken
// effect, so the job must not claim failed (P6).
func TestCheckSendRefusalAfterUnknownIsHonest(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusInternalServerError)
	j := newJob(tg.URL(), func(j *store.Job) { j.KeyTTL = time.Hour })
	enqueue(t, db, j)
	var calls atomic.Int64
	cfg := testConfig(t)
	cfg.CheckSend = func(context.Context, *store.Job) error {
		if calls.Add(1) == 1 {
			return nil
		}
		return errBoom
	}
	runIdle(t, db, cfg)

	got := getJob(t, db, j.ID)
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d requests, want 1", n)
	}
	wantState(t, got, store.StateNeedsAttention)
	wantContains(t, "reason", got.Reason, errBoom.Error())
}

// TestCheckSendRefusedIsPermanent: a send refused before any byte leaves
// (the error matches ErrNotAllowed) fails a fresh job, and the target is
// never contacted. Other CheckSend errors: TestCheckSendRefusalOrFailure.
func TestCheckSendRefusedIsPermanent(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusOK)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.CheckSend = func(context.Context, *store.Job) error { return fmt.Errorf("%w: %w", errBoom, runner.ErrNotAllowed) }
	runIdle(t, db, cfg)

	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateFailed)
	if n := tg.N(); n != 0 {
		t.Errorf("target received %d requests, want 0", n)
	}
	wantContains(t, "reason", got.Reason, "refused before sending", errBoom.Error())
}

// CheckSend sees a copy of the claimed job: a hook that edits it (say, to
// "normalise" the URL) changes neither what is sent nor what is stored
// (P2: one key, one request, for life).
func TestCheckSendCannotChangeTheRequest(t *testing.T) {
	tg := statusTarget(t, http.StatusCreated)
	db := openStore(t)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.CheckSend = func(_ context.Context, j *store.Job) error {
		j.Request.URL = tg.URL() + "/elsewhere" // a hook "normalising" the URL
		return nil
	}
	runIdle(t, db, cfg)
	got := getJob(t, db, j.ID)
	if got.Request.URL != j.Request.URL {
		t.Errorf("stored request URL after the run = %q; enqueued %q (P2: one key, one request, for life)", got.Request.URL, j.Request.URL)
	}
}
