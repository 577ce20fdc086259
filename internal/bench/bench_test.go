package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestRunSmall runs the whole bench on a small store and checks that every
// figure is filled in and that the target saw every job exactly once (plus
// the one job of the restart measurement).
func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{Jobs: 300, Workers: 8, Producers: 4, Preload: 500, Dir: dir})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for name, v := range map[string]float64{
		"enqueue_jobs_per_s": res.EnqueueJobsPerS, "enqueue_many_jobs_per_s": res.EnqueueManyJobsPerS,
		"worked_jobs_per_s": res.WorkedJobsPerS, "raw_update_commits_per_s": res.RawUpdateCommitsPerS,
		"commits_per_job": res.CommitsPerJob, "enqueue_p50_ms": res.EnqueueP50Ms, "enqueue_p99_ms": res.EnqueueP99Ms,
		"restart_to_first_send_ms": res.RestartToFirstSendMs,
	} {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if res.TargetRequestsReceived != 300 {
		t.Errorf("target received %d requests while working 300 jobs, want 300", res.TargetRequestsReceived)
	}
	if res.CommitsPerJob > 2 {
		t.Errorf("commits per job = %.2f, want at most 2", res.CommitsPerJob)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("bench left %s behind", e.Name())
	}
}
