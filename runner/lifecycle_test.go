package runner_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// A send check cut short by shutdown (a slow resolver) sent nothing: the
// job goes back to pending, its attempt budget untouched, and the target
// saw nothing.
func TestShutdownDuringSendCheckKeepsJobPending(t *testing.T) {
	db := openStore(t)
	tg := newTarget(t, nil)
	j := newJob(tg.URL())
	enqueue(t, db, j)
	inCheck := make(chan struct{}, 1)
	cfg := testConfig(t)
	cfg.UntilIdle = false
	cfg.ShutdownGrace = 50 * time.Millisecond
	cfg.CheckSend = func(ctx context.Context, j *store.Job) error {
		inCheck <- struct{}{}
		<-ctx.Done()                                                      // a slow resolver, cut by the shutdown
		_, err := net.DefaultResolver.LookupNetIP(ctx, "ip", "localhost") // what api.SendCheck does
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.New(db, cfg).Run(ctx) }()
	<-inCheck
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := getJob(t, db, j.ID)
	if got.State != store.StatePending || got.AttemptsLeft() != got.MaxAttempts {
		t.Errorf("after shutdown a never-sent job is %s (%s: %q), %d of %d attempts left; want pending with all left",
			got.State, got.LastClass, got.Reason, got.AttemptsLeft(), got.MaxAttempts)
	}
	if n := tg.N(); n != 0 {
		t.Errorf("target got %d requests", n)
	}
}

// Run stopped before its recovery ended returns nil, as any stop does.
func TestCancelBeforeRecoveryReturnsNil(t *testing.T) {
	db := openStore(t)
	cfg := testConfig(t)
	cfg.UntilIdle = false
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runner.New(db, cfg).Run(ctx); err != nil {
		t.Errorf("Run(canceled ctx) = %v, want nil", err)
	}
}

// A CheckSend error that is not a refusal of the target (a resolver that
// failed) is a no-effect outcome, retried under the budget; one matching
// ErrNotAllowed fails the job at once. Nothing reaches the target either
// way.
func TestCheckSendRefusalOrFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		err      error
		attempts int
		class    string
	}{
		{"resolver failure", errors.New("allowlist: resolving \"h\": lookup h: server misbehaving"), 3, string(runner.ClassNoEffect)},
		{"not allowed", fmt.Errorf("allowlist: host \"h\" is not allowed: %w", runner.ErrNotAllowed), 1, string(runner.ClassPermanent)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := newTarget(t, nil)
			j := newJob(tg.URL(), func(j *store.Job) { j.MaxAttempts = 3 })
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.CheckSend = func(context.Context, *store.Job) error { return tc.err }
			runIdle(t, db, cfg)
			got := getJob(t, db, j.ID)
			if got.State != store.StateFailed || got.Attempts != tc.attempts || got.LastClass != tc.class {
				t.Errorf("job %s after %d attempts (last %s: %s); want failed after %d, last %s",
					got.State, got.Attempts, got.LastClass, got.LastError, tc.attempts, tc.class)
			}
			if n := tg.N(); n != 0 {
				t.Errorf("target got %d requests", n)
			}
		})
	}
}
