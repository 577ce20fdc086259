package runner_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// A --replay-safe POST whose attempt reached the target and was answered
// 500 (an unknown outcome, ARCHITECTURE.md §3) is retried but never ends in a state that claims
// the effect did not happen: canceled ("before any attempt could have had
// an effect") or failed ("the effect did not happen").
func TestReplaySafeUnknownCannotBeCanceled(t *testing.T) {
	db := openStore(t)
	creates := 0
	var mu sync.Mutex
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		mu.Lock()
		creates++ // the target commits, then its gateway answers 500
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.ReplaySafe = true })
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.Backoff.Base, cfg.Backoff.Cap = 30*time.Second, 30*time.Second // stay pending after attempt 1
	runUntil(t, db, cfg, func(j *store.Job) bool { return j.State == store.StatePending && j.Attempts == 1 })
	got := getJob(t, db, j.ID)
	t.Logf("after attempt 1: state=%s may_have_effect=%v last=%q creates at target=%d", got.State, got.MayHaveEffect, got.LastError, creates)
	c, err := db.Cancel(context.Background(), j.ID, time.Now(), "op", "")
	if err == nil {
		t.Fatalf("Cancel accepted: job %s is %s though the target created it %d time(s)", j.ID, c.State, creates)
	}
}

// The same job with its attempts used up ends needs_attention, not failed.
func TestReplaySafeUnknownExhaustedNeedsAttention(t *testing.T) {
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "committed, then the gateway failed")
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.ReplaySafe = true; j.MaxAttempts = 2 })
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))
	got := getJob(t, db, j.ID)
	if got.State == store.StateFailed {
		t.Fatalf("job ended failed (%q) though the target received %d requests, each answered 500 (may have taken effect)", got.Reason, tg.N())
	}
}
