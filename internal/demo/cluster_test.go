package demo

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/internal/pgtest"
)

// syncBuffer is a bytes.Buffer that several nodes' logs write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clusterFaults is a fault mix no job can exhaust within 8 attempts and
// 40 status queries but by a run of bad luck far below one in a million:
// every job ends succeeded.
func clusterFaults() faketarget.Faults {
	return faketarget.Faults{
		LoseResponse:       0.12,
		Busy503:            0.08,
		TooMany429:         0.03,
		CommitThen500:      0.04,
		CommitThen504:      0.03,
		SlowCommit:         0.06,
		DropBeforeHandling: 0.03,
		FlakyStatus:        0.15,
		RetryAfter:         "1",
		SlowCommitDelay:    1200 * time.Millisecond,
		StatusHang:         1200 * time.Millisecond,
		Latency:            20 * time.Millisecond,
	}
}

// TestClusterChaos: three runner processes share a Postgres database; one
// at a time is killed with SIGKILL at random moments and started again,
// and halfway the database itself crashes (pg_ctl stop -m immediate) and
// comes back. The target does not deduplicate and loses responses,
// commits slowly, answers 503 and fails after committing. Every job must
// end succeeded, each payment created once, counted at the target.
func TestClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test starts real processes; skipped with -short")
	}
	bin := buildBinary(t)
	srv := pgtest.Private(t) // its own: the test crash-restarts it
	f := clusterFaults()
	const jobs, kills = 300, 8
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	restarts := 0
	seed := uint64(time.Now().UnixNano())
	start := time.Now()
	sum, err := Run(ctx, Config{
		Binary:       bin,
		DB:           srv.URL,
		Schema:       "idemrun_chaos",
		Nodes:        3,
		Jobs:         jobs,
		Kills:        kills,
		Workers:      8,
		LeaseTTL:     2 * time.Second,
		Faults:       &f,
		Seed:         seed,
		KillAfterMin: 200 * time.Millisecond,
		KillAfterMax: 900 * time.Millisecond,
		Timeout:      55 * time.Second,
		RunnerLog:    &log,
		MidRun: func(ctx context.Context) error {
			restarts++
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return srv.Restart(rctx)
		},
	})
	if err != nil {
		t.Fatalf("chaos run (seed %d): %v\nnode logs:\n%s", seed, err, tail(log.String(), 6000))
	}
	var out bytes.Buffer
	PrintSummary(&out, sum)
	t.Logf("seed %d, %s:\n%s", seed, time.Since(start).Round(100*time.Millisecond), out.String())
	if sum.Kills != kills || sum.DBRestarts != 1 || restarts != 1 {
		t.Errorf("nodes killed %d times (want %d), database restarted %d times (want 1, MidRun called %d)", sum.Kills, kills, sum.DBRestarts, restarts)
	}
	if len(sum.Duplicates) != 0 {
		t.Errorf("duplicates at the target: %v", sum.Duplicates)
	}
	if len(sum.Lost) != 0 {
		t.Errorf("lost jobs: %v", sum.Lost)
	}
	if len(sum.Violations) != 0 {
		t.Errorf("end states that claim more than the target holds: %v", sum.Violations)
	}
	for k, lines := range sum.Evidence {
		t.Errorf("evidence for %s:\n  %s", k, strings.Join(lines, "\n  "))
	}
	if sum.ByState["succeeded"] != jobs || sum.Creates != jobs {
		t.Errorf("succeeded %d and created at the target %d, want %d each; by state %v; other ends:\n  %s",
			sum.ByState["succeeded"], sum.Creates, jobs, sum.ByState, strings.Join(sum.OtherEnds, "\n  "))
	}
	if len(sum.NodeExits) > 0 {
		t.Logf("nodes that exited by themselves (started again):\n  %s", strings.Join(sum.NodeExits, "\n  "))
	}
	if t.Failed() {
		t.Logf("node logs:\n%s", tail(log.String(), 6000))
	} else {
		t.Logf("%d jobs, %d node kills, 1 database crash: 0 duplicates, 0 lost", jobs, kills)
	}
}

// TestClusterCommitCuts: the nodes reach Postgres through a proxy that
// cuts the connection right after forwarding one COMMIT in twenty: the
// server commits and the node never hears it (a network or host failure
// at the worst moment), on claims, chained claims, outcome writes and
// rescues alike. Nodes are killed twice only: a kill rescues the jobs its
// node stranded, which would hide a node that strands them. At the
// target: 0 duplicates, 0 lost, every job succeeded.
func TestClusterCommitCuts(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test starts real processes; skipped with -short")
	}
	// A claim whose COMMIT the node never hears leaves the job running,
	// owned by a live node that does not know it has it and spares it
	// from its rescues: the node adopts such jobs into unknown at its
	// next heartbeat (runner/orphans.go), which this test depends on.
	bin := buildBinary(t)
	url, schema := pgtest.Schema(t)
	seed := uint64(time.Now().UnixNano())
	proxy, err := pgtest.StartProxy(url, seed)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetCutAfterCommit(0.05)
	f := faketarget.Faults{
		LoseResponse:    0.08,
		Busy503:         0.05,
		CommitThen500:   0.03,
		SlowCommit:      0.04,
		FlakyStatus:     0.1,
		RetryAfter:      "1",
		SlowCommitDelay: 1200 * time.Millisecond,
		StatusHang:      1200 * time.Millisecond,
		Latency:         20 * time.Millisecond,
	}
	const jobs, kills = 300, 2
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	start := time.Now()
	sum, err := Run(ctx, Config{
		Binary:       bin,
		DB:           url,
		NodeDB:       proxy.URL,
		Schema:       schema,
		Nodes:        3,
		Jobs:         jobs,
		Kills:        kills,
		Workers:      8,
		LeaseTTL:     2 * time.Second,
		Faults:       &f,
		Seed:         seed,
		KillAfterMin: 200 * time.Millisecond,
		KillAfterMax: 900 * time.Millisecond,
		Timeout:      55 * time.Second,
		RunnerLog:    &log,
	})
	t.Logf("proxy: %d of %d commits cut", proxy.Cuts(), proxy.Commits())
	if err != nil {
		t.Fatalf("chaos run (seed %d): %v\nnode logs:\n%s", seed, err, tail(log.String(), 60000))
	}
	var out bytes.Buffer
	PrintSummary(&out, sum)
	t.Logf("seed %d, %s:\n%s", seed, time.Since(start).Round(100*time.Millisecond), out.String())
	if proxy.Cuts() == 0 {
		t.Errorf("the proxy cut no commit")
	}
	if len(sum.Duplicates) != 0 || len(sum.Lost) != 0 || len(sum.Violations) != 0 {
		t.Errorf("duplicates %v, lost %v, false end states %v", sum.Duplicates, sum.Lost, sum.Violations)
	}
	for k, lines := range sum.Evidence {
		t.Errorf("evidence for %s:\n  %s", k, strings.Join(lines, "\n  "))
	}
	if sum.ByState["succeeded"] != jobs || sum.Creates != jobs {
		t.Errorf("succeeded %d and created at the target %d, want %d each; by state %v; other ends:\n  %s",
			sum.ByState["succeeded"], sum.Creates, jobs, sum.ByState, strings.Join(sum.OtherEnds, "\n  "))
	}
	if t.Failed() {
		t.Logf("node logs:\n%s", tail(log.String(), 6000))
	}
}

// TestClusterOutage: the database is down for twice the nodes' lease
// (crashed, then started 4 s later) while they work. Every lease has
// expired when it returns: a node whose heartbeat is then refused goes
// on as a new runner in the same process (runner lease lost; starting
// again), and the first to beat rescues the others' jobs into unknown.
// No exit the outage does not explain is allowed; at the target: 0
// duplicates, 0 lost, every job succeeded.
func TestClusterOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test starts real processes; skipped with -short")
	}
	bin := buildBinary(t)
	srv := pgtest.Private(t)
	f := clusterFaults()
	const jobs, kills, ttl = 300, 4, 2 * time.Second
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	start := time.Now()
	sum, err := Run(ctx, Config{
		Binary:       bin,
		DB:           srv.URL,
		Nodes:        3,
		Jobs:         jobs,
		Kills:        kills,
		Workers:      8,
		LeaseTTL:     ttl,
		Faults:       &f,
		Seed:         seed,
		KillAfterMin: 200 * time.Millisecond,
		KillAfterMax: 900 * time.Millisecond,
		Timeout:      55 * time.Second,
		RunnerLog:    &log,
		MidRun: func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return srv.RestartAfter(rctx, 2*ttl)
		},
	})
	if err != nil {
		t.Fatalf("outage run (seed %d): %v\nnode logs:\n%s", seed, err, tail(log.String(), 20000))
	}
	var out bytes.Buffer
	PrintSummary(&out, sum)
	t.Logf("seed %d, %s:\n%s", seed, time.Since(start).Round(100*time.Millisecond), out.String())
	if len(sum.Duplicates) != 0 || len(sum.Lost) != 0 || len(sum.Violations) != 0 {
		t.Errorf("duplicates %v, lost %v, false end states %v", sum.Duplicates, sum.Lost, sum.Violations)
	}
	for k, lines := range sum.Evidence {
		t.Errorf("evidence for %s:\n  %s", k, strings.Join(lines, "\n  "))
	}
	if sum.ByState["succeeded"] != jobs || sum.Creates != jobs {
		t.Errorf("succeeded %d and created at the target %d, want %d each; by state %v; other ends:\n  %s",
			sum.ByState["succeeded"], sum.Creates, jobs, sum.ByState, strings.Join(sum.OtherEnds, "\n  "))
	}
	// A node started just before the crash may also meet it in the rescue
	// it runs as it starts, which does not try again but ends the process.
	// A lost lease ends no process.
	for _, e := range sum.NodeExits {
		if !strings.Contains(e, "runner: recovery: ") {
			t.Errorf("a node exited for a reason the outage does not explain: %s", e)
		}
	}
	if n := strings.Count(log.String(), "starting again as a new runner"); n == 0 {
		t.Errorf("no node logged that it went on as a new runner after the outage")
	}
	if t.Failed() {
		t.Logf("node logs:\n%s", tail(log.String(), 20000))
	}
}
