package runner_test

import (
	"net/http"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// TestRecoveredReplaySafeJobIsRetried: a GET (replay-safe by RFC 9110, and
// what EnqueueOptions.ReplaySafe declares: "unknown transport outcomes are
// then retried directly") left running by a crash is retried after
// recovery, as an unknown transport outcome would be without the crash.
func TestRecoveredReplaySafeJobIsRetried(t *testing.T) {
	t.Parallel()
	tg := statusTarget(t, http.StatusOK)
	get := newJob(tg.URL(), func(j *store.Job) { j.Request.Method = http.MethodGet; j.Request.Body = nil })
	safe := newJob(tg.URL(), func(j *store.Job) { j.ReplaySafe = true })
	path := crashWithRunningJobs(t, get, safe)
	db := openStoreAt(t, path)
	runIdle(t, db, testConfig(t))
	for _, j := range []*store.Job{get, safe} {
		got := getJob(t, db, j.ID)
		if got.State != store.StateSucceeded {
			t.Errorf("replay-safe job (%s, ReplaySafe %v) after a crash: %s (%s); want it retried and succeeded", got.Request.Method, got.ReplaySafe, got.State, got.Reason)
		}
	}
	if n := tg.N(); n != 2 {
		t.Errorf("target received %d requests, want 2", n)
	}
}
