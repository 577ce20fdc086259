package runner_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// crashWithRunningJobs enqueues jobs, claims them as a runner would (the
// attempt record durable), and closes the store without finishing them:
// what a kill -9 mid-attempt leaves on disk. It returns the store's path.
func crashWithRunningJobs(t *testing.T, jobs ...*store.Job) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idemrun.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	defer db.Close()
	enqueue(t, db, jobs...)
	now := time.Now()
	claims, err := db.ClaimDue(context.Background(), store.ClaimRequest{State: store.StatePending, Now: now, Limit: len(jobs) + 1, Prepare: func(j *store.Job) {
		j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
	}})
	if err != nil {
		t.Fatalf("ClaimDue: %v", err)
	}
	if len(claims) != len(jobs) {
		t.Fatalf("claimed %d jobs, want %d", len(claims), len(jobs))
	}
	return path
}

// TestRecoverAfterCrash: jobs a crash left running become unknown with a
// recovery event, and none is sent again without a way to learn its
// outcome.
func TestRecoverAfterCrash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		mod       func(j *store.Job)
		checker   statusquery.Checker
		wantState store.State
		wantSends int64
	}{
		{
			name:      "no status url, no key ttl",
			mod:       func(*store.Job) {},
			wantState: store.StateNeedsAttention,
			wantSends: 0,
		},
		{
			name: "checker finds them",
			mod:  func(*store.Job) {},
			checker: statusquery.CheckerFunc(func(context.Context, statusquery.Query) statusquery.Answer {
				return statusquery.Answer{Outcome: statusquery.FoundSucceeded, HTTPStatus: 200, Detail: "found"}
			}),
			wantState: store.StateSucceeded,
			wantSends: 0,
		},
		{
			name:      "replayed inside the key ttl",
			mod:       func(j *store.Job) { j.KeyTTL = time.Hour },
			wantState: store.StateSucceeded,
			wantSends: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tg := statusTarget(t, http.StatusCreated)
			jobs := []*store.Job{newJob(tg.URL(), tt.mod), newJob(tg.URL(), tt.mod), newJob(tg.URL(), tt.mod)}
			path := crashWithRunningJobs(t, jobs...)

			db := openStoreAt(t, path)
			cfg := testConfig(t)
			cfg.Checker = tt.checker
			before := time.Now()
			r := runner.New(db, cfg)
			n, err := r.Recover(context.Background())
			if err != nil || n != len(jobs) {
				t.Fatalf("Recover = %d, %v; want %d, nil", n, err, len(jobs))
			}
			if n, err := r.Recover(context.Background()); err != nil || n != 0 {
				t.Errorf("second Recover = %d, %v; want 0, nil", n, err)
			}
			for _, j := range jobs {
				got := getJob(t, db, j.ID)
				wantState(t, got, store.StateUnknown)
				if !got.MayHaveEffect || got.Attempts != 1 {
					t.Errorf("job %s: may-have-effect %v, attempts %d; want true, 1", got.ID, got.MayHaveEffect, got.Attempts)
				}
				rec := got.LastEvent(store.EventRecovery)
				if rec == nil || rec.From != store.StateRunning || rec.To != store.StateUnknown {
					t.Errorf("job %s: recovery event %+v, want running → unknown", got.ID, rec)
				}
				if ev := got.LastEvent(store.EventAttempt); ev == nil || ev.End.IsZero() || ev.Class != string(runner.ClassUnknown) {
					t.Errorf("job %s: attempt event %+v, want closed as unknown", got.ID, ev)
				}
				if got.NextRunAt.Before(before.Add(cfg.QuietPeriod)) {
					t.Errorf("job %s: next run %s, want after the quiet period", got.ID, got.NextRunAt)
				}
			}

			runIdle(t, db, cfg)
			if n := tg.N(); n != tt.wantSends {
				t.Errorf("target received %d requests, want %d", n, tt.wantSends)
			}
			for _, j := range jobs {
				got := getJob(t, db, j.ID)
				wantState(t, got, tt.wantState)
				if tt.wantState == store.StateNeedsAttention {
					wantParkedReason(t, got.Reason)
				}
			}
		})
	}
}

// TestShutdownRecordsInFlightAttempt: an attempt still in flight when the
// grace period ends is canceled and recorded as unknown before Run returns.
func TestShutdownRecordsInFlightAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		statusURL bool
		wantState store.State
	}{
		{"no status url", false, store.StateNeedsAttention},
		{"status url", true, store.StateUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg, arrived, _ := blockingTarget(t)
			j := newJob(tg.URL(), func(j *store.Job) {
				j.AttemptTimeout = 30 * time.Second
				if tt.statusURL {
					j.StatusURL = tg.URL() + "/status/{key}"
				}
			})
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.UntilIdle = false
			cfg.ShutdownGrace = 50 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runner.New(db, cfg).Run(ctx) }()
			select {
			case <-arrived:
			case <-time.After(runTimeout):
				t.Fatal("the attempt never reached the target")
			}
			start := time.Now()
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(runTimeout):
				t.Fatal("Run did not return after cancel")
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("Run returned %s after cancel with a 50ms grace, want promptly", el)
			}
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}

			got := getJob(t, db, j.ID)
			wantState(t, got, tt.wantState)
			if got.LastClass != string(runner.ClassUnknown) || !got.MayHaveEffect {
				t.Errorf("class, may-have-effect = %q, %v, want unknown, true", got.LastClass, got.MayHaveEffect)
			}
			if ev := got.LastEvent(store.EventAttempt); ev == nil || ev.End.IsZero() || ev.Class != string(runner.ClassUnknown) {
				t.Errorf("attempt event %+v, want closed as unknown", ev)
			}
			wantContains(t, "last error", got.LastError, "canceled by shutdown after sending")
			if n := tg.N(); n != 1 {
				t.Errorf("target received %d requests, want 1", n)
			}
		})
	}
}

// TestShutdownLetsAttemptFinishWithinGrace: an attempt that answers inside
// the grace period is recorded with its real outcome.
func TestShutdownLetsAttemptFinishWithinGrace(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	arrived := make(chan struct{}, 1)
	proceed := make(chan struct{})
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		arrived <- struct{}{}
		select {
		case <-proceed:
			w.WriteHeader(http.StatusCreated)
		case <-r.Context().Done():
		}
	})
	j := newJob(tg.URL())
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.ShutdownGrace = runTimeout
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runner.New(db, cfg).Run(ctx) }()
	select {
	case <-arrived:
	case <-time.After(runTimeout):
		t.Fatal("the attempt never reached the target")
	}
	cancel()
	close(proceed)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
}

// TestRunCancelDuringWaitReturnsPromptly: with nothing due, Run sleeps; a
// cancel wakes it at once, whatever the poll interval.
func TestRunCancelDuringWaitReturnsPromptly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		future bool
	}{
		{"empty store", false},
		{"job due in an hour", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			if tt.future {
				tg := statusTarget(t, http.StatusOK)
				enqueue(t, db, newJob(tg.URL(), func(j *store.Job) { j.NextRunAt = j.NextRunAt.Add(time.Hour) }))
			}
			waiting := make(chan struct{}, 1)
			hs := hookStore{DB: db, beforeOldestDue: func() {
				select {
				case waiting <- struct{}{}:
				default:
				}
			}}
			cfg := testConfig(t)
			cfg.UntilIdle = false
			cfg.PollInterval = time.Hour
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runner.New(hs, cfg).Run(ctx) }()
			select {
			case <-waiting:
			case <-time.After(runTimeout):
				t.Fatal("Run never went to sleep")
			}
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(runTimeout):
				t.Fatal("Run did not return after cancel")
			}
			if el := time.Since(start); el > 50*time.Millisecond {
				t.Errorf("Run returned %s after cancel, want within 50ms", el)
			}
		})
	}
}

// TestUntilIdleLeavesNothingOpen: a mix of outcomes under several workers;
// when an UntilIdle Run returns, no job is running, pending or unknown, and
// every attempt record is closed.
func TestUntilIdleLeavesNothingOpen(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	var served atomic.Int64
	release := make(chan struct{})
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		served.Add(1)
		switch r.URL.Query().Get("do") {
		case "ok":
			w.WriteHeader(http.StatusOK)
		case "busy":
			w.WriteHeader(http.StatusTooManyRequests)
		case "boom":
			w.WriteHeader(http.StatusInternalServerError)
		case "bad":
			w.WriteHeader(http.StatusBadRequest)
		case "hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "abort":
			panic(http.ErrAbortHandler)
		}
	})
	t.Cleanup(func() { close(release) })
	var jobs []*store.Job
	for i, do := range []string{"ok", "busy", "boom", "bad", "hang", "abort", "ok", "busy", "boom", "bad", "hang", "abort"} {
		jobs = append(jobs, newJob(tg.URL(), func(j *store.Job) {
			j.Request.URL = tg.URL() + "/payments?do=" + do
			j.AttemptTimeout = 100 * time.Millisecond
			if i%2 == 1 {
				j.KeyTTL = time.Hour
			}
		}))
	}
	enqueue(t, db, jobs...)
	cfg := testConfig(t)
	cfg.Workers = 3
	runIdle(t, db, cfg)

	sent := 0
	for _, j := range jobs {
		got := getJob(t, db, j.ID)
		sent += got.Attempts
		if !got.State.Terminal() && got.State != store.StateNeedsAttention {
			t.Errorf("job %s (%s) is %s after an idle Run", got.ID, j.Request.URL, got.State)
		}
		for _, ev := range attempts(got) {
			if ev.End.IsZero() || ev.Class == "" {
				t.Errorf("job %s: attempt %d left open: %+v", got.ID, ev.N, ev)
			}
		}
	}
	if n := served.Load(); n != int64(sent) {
		t.Errorf("target received %d requests, store records %d attempts", n, sent)
	}
}

// TestNotifyWakesScheduler: a job enqueued while Run sleeps is sent at once
// after Notify, not at the next poll (an hour away here).
func TestNotifyWakesScheduler(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	tg := statusTarget(t, http.StatusCreated)
	waiting := make(chan struct{}, 1)
	hs := hookStore{DB: db, beforeOldestDue: func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}}
	written := make(chan *store.Job, 4)
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.PollInterval = time.Hour
	cfg.OnWrite = func(j *store.Job) { written <- j }
	r := runner.New(hs, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}()
	select {
	case <-waiting:
	case <-time.After(runTimeout):
		t.Fatal("Run never went to sleep")
	}
	j := newJob(tg.URL())
	enqueue(t, db, j)
	r.Notify()
	select {
	case got := <-written:
		wantState(t, got, store.StateSucceeded)
	case <-time.After(runTimeout):
		t.Fatal("the job enqueued after Notify was not worked")
	}
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d requests, want 1", n)
	}
}

// lockedBuffer is an io.Writer safe for the logger's concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogsNeverCarrySecrets: logs name jobs, attempts and classes, never
// header values or bodies.
func TestLogsNeverCarrySecrets(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	const secret = "sk_live_SECRETSECRET"
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		switch r.URL.Query().Get("do") {
		case "ok":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"echo":"` + secret + `"}`))
		case "busy":
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	var jobs []*store.Job
	for _, do := range []string{"ok", "busy", "boom", "badheader"} {
		jobs = append(jobs, newJob(tg.URL(), func(j *store.Job) {
			j.Request.URL = tg.URL() + "/payments?do=" + do
			j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "X-Api-Key", Value: secret})
			j.Request.Body = []byte(`{"card":"` + secret + `"}`)
			if do == "badheader" {
				j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "X-Bad", Value: secret + "\r\n"})
			}
		}))
	}
	enqueue(t, db, jobs...)
	var logs lockedBuffer
	cfg := testConfig(t)
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	runIdle(t, db, cfg)

	out := logs.String()
	if !strings.Contains(out, jobs[0].ID) {
		t.Errorf("logs do not name job %s:\n%s", jobs[0].ID, out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("logs carry a header value or body:\n%s", out)
	}
}
