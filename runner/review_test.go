package runner_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

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

// TestOutcomeWriteRetried: an outcome commit that fails once is written
// again; the job does not stay running while the runner lives, and the
// request is sent once.
func TestOutcomeWriteRetried(t *testing.T) {
	t.Parallel()
	var failNext atomic.Bool
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), &bolt.Options{CommitHook: func(int) error {
		if failNext.CompareAndSwap(true, false) {
			return errors.New("disk hiccup")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		failNext.Store(true) // the next commit is this attempt's outcome
		w.WriteHeader(http.StatusCreated)
	})
	j := newJob(tg.URL())
	enqueue(t, db, j)
	runIdleWithin(t, db, testConfig(t), 10*time.Second)
	wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d sends, want 1", n)
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
