package runner_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// A 409 (the target has the key in progress) is a free send only up to
// MaxAttempts of them since the last manual retry, however long the job's
// history grows (it is trimmed), and a retry starts a fresh allowance.

// TestEndless409AtMaxAttemptsLimit is TestEndless409IsBounded with
// MaxAttempts at the API's limit (100): each 409 leaves two history events
// (the attempt, the "not found" query), more than the 200 the history
// keeps, and the sends must still stop at 2·MaxAttempts.
func TestEndless409AtMaxAttemptsLimit(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusConflict)
	status := statusTarget(t, http.StatusNotFound)
	const maxAttempts = 100
	j := newJob(tg.URL(), func(j *store.Job) {
		j.MaxAttempts = maxAttempts
		j.StatusURL = status.URL() + "/s/{key}"
		j.DeadlineAfter = 8 * time.Second
		j.Deadline = j.CreatedAt.Add(j.DeadlineAfter)
	})
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.QuietPeriod = time.Millisecond
	cfg.StatusGrace = time.Millisecond
	runIdleWithin(t, db, cfg, 20*time.Second)
	got := getJob(t, db, j.ID)
	t.Logf("state %s, sends %d, attempt base %d, dropped %d", got.State, tg.N(), got.AttemptBase, got.HistoryDropped)
	if n := tg.N(); n > 2*maxAttempts {
		t.Errorf("target received %d sends, want at most 2·MaxAttempts = %d", n, 2*maxAttempts)
	}
}

// Test409BudgetSurvivesHistoryTrim: free 409 answers are meant to be
// bounded by MaxAttempts ("beyond MaxAttempts of them they count like any
// attempt"), so a target that answers 409 to every send while its status
// endpoint finds nothing gets at most 2·MaxAttempts sends. The count of
// 409s is taken from the history, which keeps only MaxHistory (200)
// events; once the status-query events between the 409s push old 409s
// out, the count never reaches MaxAttempts and every 409 stays free, so
// the sends go on until the deadline.
func Test409BudgetSurvivesHistoryTrim(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusConflict)
	const maxAttempts = 12
	j := newJob(tg.URL(), func(j *store.Job) {
		j.MaxAttempts = maxAttempts
		j.DeadlineAfter = 6 * time.Second
		j.Deadline = j.CreatedAt.Add(j.DeadlineAfter)
	})
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.QuietPeriod = time.Millisecond
	cfg.StatusBackoff.Cap = time.Millisecond
	cfg.StatusGrace = time.Millisecond
	// The status endpoint says "processing" 19 times, then "not found",
	// per unknown episode (inside the default budget of 20).
	var q atomic.Int64
	cfg.Checker = statusquery.CheckerFunc(func(context.Context, statusquery.Query) statusquery.Answer {
		if q.Add(1)%20 == 0 {
			return statusquery.Answer{Outcome: statusquery.NotFound, HTTPStatus: 404, Detail: "404"}
		}
		return statusquery.Answer{Outcome: statusquery.InProgress, HTTPStatus: 200, Detail: "processing"}
	})
	runIdleWithin(t, db, cfg, 20*time.Second)
	got := getJob(t, db, j.ID)
	t.Logf("state %s, sends %d, attempts %d, attempt base %d, history %d (+%d dropped)",
		got.State, tg.N(), got.Attempts, got.AttemptBase, len(got.History), got.HistoryDropped)
	if n := tg.N(); n > 2*maxAttempts {
		t.Errorf("target received %d sends, want at most 2·MaxAttempts = %d", n, 2*maxAttempts)
	}
}

// TestRetryGivesFresh409Allowance: a person's retry gives a fresh
// attempt budget (AttemptBase, RetryBase); the free 409 answers of the
// first life still count against the second, so the retried job gets
// fewer sends than the same job did the first time.
func TestRetryGivesFresh409Allowance(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusConflict)
	status := statusTarget(t, http.StatusNotFound)
	j := newJob(tg.URL(), func(j *store.Job) {
		j.MaxAttempts = 2
		j.StatusURL = status.URL() + "/s/{key}"
	})
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))
	first := tg.N()
	wantState(t, getJob(t, db, j.ID), store.StateNeedsAttention)
	ctx := context.Background()
	if _, err := db.Resolve(ctx, j.ID, store.StateFailed, time.Now(), "r", "checked: nothing at the target"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Retry(ctx, j.ID, time.Now(), "r", "again"); err != nil {
		t.Fatal(err)
	}
	runIdle(t, db, testConfig(t))
	second := tg.N() - first
	t.Logf("first life %d sends, second life %d sends", first, second)
	if second != first {
		t.Errorf("after a retry the job got %d sends, the first time %d", second, first)
	}
}

// TestEndless409IsBounded: a target that answers 409 to every send while
// its status endpoint finds nothing must not keep the job going until the
// deadline, and must not end it failed: the 409 said something with the
// key was in progress.
func TestEndless409IsBounded(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusConflict)
	status := statusTarget(t, http.StatusNotFound)
	j := newJob(tg.URL(), func(j *store.Job) {
		j.MaxAttempts = 2
		j.StatusURL = status.URL() + "/s/{key}"
	})
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateNeedsAttention)
	// Free 409s are bounded by MaxAttempts, then they count: at most
	// 2·MaxAttempts sends.
	if n := tg.N(); n > 4 {
		t.Errorf("target received %d sends, want at most 4", n)
	}
}

// Test409WithoutStatusURLStaysInKeyTTL: after a 409, a job with a key TTL
// and no status URL is resent only inside the TTL window.
func Test409WithoutStatusURLStaysInKeyTTL(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusConflict)
	j := newJob(tg.URL(), func(j *store.Job) {
		j.MaxAttempts = 50
		j.KeyTTL = time.Minute + 300*time.Millisecond // window: 300 ms after the first send
	})
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.Backoff = runner.Backoff{Base: 50 * time.Millisecond, Cap: 50 * time.Millisecond}
	start := time.Now()
	runIdleWithin(t, db, cfg, 10*time.Second)
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateNeedsAttention)
	var last time.Time
	sent := 0
	for _, e := range attempts(got) {
		if strings.HasPrefix(e.Error, "not sent") {
			continue // claimed, then refused before any byte left
		}
		last = e.Start
		sent++
	}
	if int64(sent) != tg.N() {
		t.Errorf("store records %d sends, target received %d", sent, tg.N())
	}
	if limit := got.FirstSentAt.Add(300 * time.Millisecond); last.After(limit) {
		t.Errorf("last send at +%s, after the key TTL window closed at +%s", last.Sub(got.FirstSentAt), limit.Sub(got.FirstSentAt))
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s; the window should end it in well under a second", time.Since(start))
	}
}
