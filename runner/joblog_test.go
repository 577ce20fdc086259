package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// logLines are the lines of a text handler's output whose message is msg.
func logLines(out, msg string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "msg="+fmt.Sprintf("%q", msg)) || strings.Contains(l, "msg="+msg+" ") {
			got = append(got, l)
		}
	}
	return got
}

// lineOf is the one line in lines that names job id.
func lineOf(t *testing.T, lines []string, id string) string {
	t.Helper()
	var found []string
	for _, l := range lines {
		if strings.Contains(l, "job="+id+" ") {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one line for job %s, got %d:\n%s", id, len(found), strings.Join(lines, "\n"))
	}
	return found[0]
}

// At info, every job the runner ends gets one line: id, key, state,
// attempts, the time since enqueue, and for a job that did not succeed
// the reason and the last error.
func TestLogEnd(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		switch r.URL.Query().Get("do") {
		case "ok":
			w.WriteHeader(http.StatusCreated)
		case "bad":
			w.WriteHeader(http.StatusBadRequest)
		case "busy":
			w.WriteHeader(http.StatusTooManyRequests)
		case "slow":
			time.Sleep(300 * time.Millisecond)
			w.WriteHeader(http.StatusCreated)
		}
	})
	job := func(do string) *store.Job {
		return newJob(tg.URL(), func(j *store.Job) {
			j.Request.URL = tg.URL() + "/payments?do=" + do
			if do == "slow" {
				j.AttemptTimeout = 50 * time.Millisecond
			}
		})
	}
	ok, bad, busy, slow := job("ok"), job("bad"), job("busy"), job("slow")
	enqueue(t, db, ok, bad, busy, slow)
	var logs lockedBuffer
	cfg := testConfig(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	runIdle(t, db, cfg)

	ended := logLines(logs.String(), "job ended")
	if len(ended) != 4 {
		t.Fatalf("want 4 job ended lines, got %d:\n%s", len(ended), logs.String())
	}
	for _, tc := range []struct {
		j    *store.Job
		want []string
		not  []string
	}{
		{ok, []string{"level=INFO", "key=" + ok.Key, "state=succeeded", "attempts=1", "since_enqueue="}, []string{"reason=", "last_error="}},
		{bad, []string{"level=WARN", "key=" + bad.Key, "state=failed", "attempts=1", "since_enqueue=", `reason="permanent: `, "last_error=", "400"}, nil},
		{busy, []string{"level=WARN", "key=" + busy.Key, "state=failed", "attempts=3", `reason="3 attempts used; last error: `, "429"}, nil},
		{slow, []string{"level=WARN", "key=" + slow.Key, "state=needs_attention", "attempts=1", "reason=", "last_error=", "timeout"}, nil},
	} {
		l := lineOf(t, ended, tc.j.ID)
		wantContains(t, "the line of job "+tc.j.Request.URL, l, tc.want...)
		for _, n := range tc.not {
			if strings.Contains(l, n) {
				t.Errorf("the line of a succeeded job has %q: %s", n, l)
			}
		}
	}
	if strings.Contains(logs.String(), "sk_test_123") {
		t.Errorf("logs carry a header value:\n%s", logs.String())
	}
}

// At debug, an attempt's line names the job's key and says in words why
// an attempt without an answer failed.
func TestAttemptLogCarriesKeyAndError(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		time.Sleep(300 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.AttemptTimeout = 50 * time.Millisecond })
	enqueue(t, db, j)
	var logs lockedBuffer
	cfg := testConfig(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	runIdle(t, db, cfg)

	l := lineOf(t, logLines(logs.String(), "attempt finished"), j.ID)
	wantContains(t, "the attempt line", l, "key="+j.Key, "class=unknown", "error=", "timeout")
	if strings.Contains(l, "status=0") {
		t.Errorf("the attempt line of a timeout shows status 0: %s", l)
	}
}

// A busy runner logs a summary of the jobs that ended every
// SummaryInterval; an idle one logs none.
func TestSummarize(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		time.Sleep(150 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	})
	var jobs []*store.Job
	for range 3 {
		jobs = append(jobs, newJob(tg.URL()))
	}
	enqueue(t, db, jobs...)
	var logs lockedBuffer
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.SummaryInterval = 50 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r := runner.New(db, cfg)
	go func() { done <- r.Run(ctx) }()
	for i := 0; i < 200 && len(logLines(logs.String(), "job ended")) < 3; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(10 * cfg.SummaryInterval) // idle: no summary may follow
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	sums := logLines(logs.String(), "jobs ended")
	if len(sums) == 0 {
		t.Fatalf("no summary while busy:\n%s", logs.String())
	}
	total := 0
	num := regexp.MustCompile(`succeeded=(\d+) failed=(\d+) needs_attention=(\d+) in_flight=(\d+)`)
	for _, l := range sums {
		m := num.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("summary without its counts: %s", l)
		}
		var s, f, n, in int
		fmt.Sscan(m[1]+" "+m[2]+" "+m[3]+" "+m[4], &s, &f, &n, &in)
		if s+f+n == 0 && in == 0 {
			t.Errorf("summary while idle: %s", l)
		}
		total += s
	}
	if total != 3 {
		t.Errorf("summaries count %d succeeded jobs, want 3:\n%s", total, strings.Join(sums, "\n"))
	}
}

// A Run that stops when idle says once per wait what it waits for when
// the jobs left are due later.
func TestNoteIdleWait(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusCreated)
	later := time.Now().Add(time.Second)
	enqueue(t, db, newJob(tg.URL(), func(j *store.Job) { j.NextRunAt = later }), newJob(tg.URL(), func(j *store.Job) { j.NextRunAt = later.Add(time.Second) }))
	var logs lockedBuffer
	cfg := testConfig(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	runIdle(t, db, cfg)

	// One line per wait, not one per poll: before the first job, then
	// before the second.
	waits := logLines(logs.String(), "waiting for jobs due later before stopping when idle")
	if len(waits) != 2 {
		t.Fatalf("want two lines saying what the run waits for, got %d:\n%s", len(waits), logs.String())
	}
	wantContains(t, "the first wait line", waits[0], "jobs=2", "next_due="+later.UTC().Format(time.RFC3339))
	wantContains(t, "the second wait line", waits[1], "jobs=1", "next_due="+later.Add(time.Second).UTC().Format(time.RFC3339))
}

// Without a Logger the runner logs at info to standard error (run in a
// child process, whose standard error the test reads).
func TestDefaultLogger(t *testing.T) {
	if os.Getenv("RUNNER_TEST_DEFAULT_LOGGER") == "1" {
		db := openStore(t)
		tg := statusTarget(t, http.StatusCreated)
		enqueue(t, db, newJob(tg.URL(), func(j *store.Job) { j.Key = "default-logger-key" }))
		cfg := testConfig(t)
		cfg.Logger = nil
		runIdle(t, db, cfg)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultLogger$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RUNNER_TEST_DEFAULT_LOGGER=1")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	wantContains(t, "the default logger's output", stderr.String(), "INFO job ended", "key=default-logger-key", "state=succeeded")
}
