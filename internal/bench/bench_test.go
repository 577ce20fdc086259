package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
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
		"restart_to_first_send_ms": res.RestartToFirstSendMs, "http_ceiling_req_per_s": res.HTTPCeilingReqPerS,
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

// TestRunOnDB benches on a given database path (--db): the file and its
// scratch siblings exist only while the bench runs, and an existing file is
// refused before anything is written.
func TestRunOnDB(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bench.db")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{Jobs: 100, Workers: 4, Producers: 2, DB: path})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.WorkedJobsPerS <= 0 || res.TargetRequestsReceived != 100 {
		t.Errorf("worked %v jobs/s, target saw %d requests, want > 0 and 100", res.WorkedJobsPerS, res.TargetRequestsReceived)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("bench left %s behind", e.Name())
	}

	if err := os.WriteFile(path+".raw", []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, Config{Jobs: 10, DB: path}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("Run over an existing %s.raw: err %v, want one saying it exists", path, err)
	}
	if b, err := os.ReadFile(path + ".raw"); err != nil || string(b) != "keep" {
		t.Errorf("refused bench changed %s.raw: %q, %v", path, b, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("refused bench created %s (stat err %v)", path, err)
	}
}

// BenchmarkLoopbackPOST is the HTTP part of a worked job alone: the bench's
// target and the runner's client (its connection cap included), the same
// POST, no store, with the runner's own transport and with net/http's. Its
// ops/s is the ceiling of worked jobs/s on the machine. Run with -cpu 2 and
// a parallelism that gives 100 or 500 goroutines:
//
//	go test -run '^$' -bench LoopbackPOST -cpu 2 ./internal/bench/
func BenchmarkLoopbackPOST(b *testing.B) {
	clients := []struct {
		name string
		new  func(int) *http.Client
	}{{"runner", runner.NewHTTPClient}, {"net/http", runner.NewNetHTTPClient}}
	for _, cl := range clients {
		for _, senders := range []int{100, 500} {
			b.Run(fmt.Sprintf("transport=%s/senders=%d", cl.name, senders), func(b *testing.B) {
				benchLoopbackPOST(b, cl.new, senders)
			})
		}
	}
}

func benchLoopbackPOST(b *testing.B, newClient func(int) *http.Client, senders int) {
	tgt, err := startTarget()
	if err != nil {
		b.Fatal(err)
	}
	defer tgt.srv.Close()
	client := newClient(min(senders, runner.DefaultMaxConnsPerHost))
	defer client.CloseIdleConnections()
	body := []byte(`{"amount":1000,"currency":"EUR"}`)
	b.SetParallelism(max(1, senders/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := postOnce(context.Background(), client, tgt.url, body); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
