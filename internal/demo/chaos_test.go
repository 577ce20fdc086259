package demo

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/faketarget"
)

// buildBinary returns the idemrun binary TestMain built for the
// subprocess runners.
func buildBinary(t *testing.T) string {
	t.Helper()
	if binPath == "" {
		t.Fatal("TestMain did not build the binary")
	}
	return binPath
}

// TestChaosKill9 kills a real runner process with SIGKILL at random moments,
// at least 10 times over 300 jobs, against a target that does not
// deduplicate and loses responses, commits slowly, answers 503 and fails
// after committing. Every claim is checked at the target.
func TestChaosKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test starts real processes; skipped with -short")
	}
	bin := buildBinary(t)
	f := faketarget.Faults{
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
		Latency:            2 * time.Millisecond,
	}
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	sum, err := Run(ctx, Config{
		Binary:       bin,
		Dir:          t.TempDir(),
		Jobs:         330,
		Kills:        10,
		Workers:      24,
		Faults:       &f,
		Dedup:        false,
		Seed:         uint64(time.Now().UnixNano()),
		KillAfterMin: 80 * time.Millisecond,
		KillAfterMax: 700 * time.Millisecond,
		Timeout:      120 * time.Second,
		RunnerLog:    &log,
	})
	if err != nil {
		t.Fatalf("chaos run: %v\nrunner log:\n%s", err, tail(log.String(), 4000))
	}
	var out bytes.Buffer
	PrintSummary(&out, sum)
	t.Log(out.String())
	if sum.Kills < 10 {
		t.Errorf("runner was killed %d times, want at least 10", sum.Kills)
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
	total := 0
	for _, n := range sum.ByState {
		total += n
	}
	if total != 330 {
		t.Errorf("jobs found in the store = %d, want 330", total)
	}
	if sum.Creates > 330 {
		t.Errorf("creates at the target = %d for 330 keys", sum.Creates)
	}
	if sum.ByState["succeeded"] == 0 {
		t.Errorf("no job succeeded: %v", sum.ByState)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
