package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/faketarget"
)

// startCLI starts an idemrun CLI command without waiting.
func (e *env) startCLI(args ...string) (*exec.Cmd, *syncBuffer) {
	e.t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Dir = e.dir
	cmd.Env = e.environ()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd, out
}

// A batch of keyless --from lines goes to a runner through its socket, and
// the runner is killed with SIGKILL after it stored the batch but before
// the CLI read the answer. The CLI cannot know whether the batch was
// stored; it gave each line its key before sending, so it sends the batch
// again (to the file, the runner being gone) and finds every job stored:
// exit 0, each payment stored once, and after a run each created once at
// the target. (Before, the CLI reported the transport error with exit 1,
// and the obvious re-run stored every job a second time.)
func TestKeylessBatchThroughKilledRunnerStoredOnce(t *testing.T) {
	t.Parallel()
	rng := crashRand(t)
	const n = 15000
	for attempt := range 12 {
		tg, err := faketarget.Start(faketarget.Config{Seed: uint64(time.Now().UnixNano())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tg.Close() })
		e := newEnv(t)
		var sb strings.Builder
		for i := range n {
			b, _ := json.Marshal(map[string]any{"url": tg.URL() + "/payments", "data": fmt.Sprintf(`{"amount":%d,"try":%d}`, i, attempt),
				"status_url": tg.StatusTemplate()})
			sb.Write(b)
			sb.WriteByte('\n')
		}
		from := filepath.Join(e.dir, "nokey.jsonl")
		if err := os.WriteFile(from, []byte(sb.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		rp := e.startRunner("--db", e.db, "--workers", "1", "--poll-interval", "50ms")
		cmd, out := e.startCLI("enqueue", "--db", e.db, "--from", from)
		// Kill the runner once the batch is committed (jobs visible),
		// which is often before the CLI has its answer.
		committed := false
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			var st map[string]int64
			if json.Unmarshal([]byte(e.run("stats", "--db", e.db, "--json").stdout), &st) == nil {
				var total int64
				for _, v := range st {
					total += v
				}
				if total >= n {
					committed = true
					break
				}
			}
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
		rp.stop(syscall.SIGKILL)
		werr := cmd.Wait()
		if !committed || !strings.Contains(out.String(), "sending it again") {
			continue // the kill did not land between the commit and the answer
		}
		t.Logf("attempt %d: CLI exit %v: %s", attempt, werr, clip(out.String()))
		if werr != nil {
			t.Fatalf("the CLI's second try failed: %v\n%s", werr, out)
		}
		st := e.statsOf("--db", e.db)
		var total int64
		for _, v := range st {
			total += v
		}
		if total != n {
			t.Fatalf("after the CLI's second try: %d jobs for %d lines: %v", total, n, st)
		}
		p := e.spawnRunner("--db", e.db, "--workers", "64", "--until-idle", "--quiet-period", "300ms", "--poll-interval", "50ms")
		select {
		case <-p.exited:
		case <-time.After(90 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Fatal("runner --until-idle did not finish within 90s")
		}
		tg.CommitInFlight()
		if got := tg.TotalCreates(); got != n {
			t.Fatalf("creates at the target: %d for %d payments", got, n)
		}
		return
	}
	t.Skip("no kill landed between the commit and the answer in 12 tries")
}
