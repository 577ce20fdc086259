package runner_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// flakyRegister fails its first registrations as a database that is
// restarting does: refused (unavailable), or cut after the write went
// through (commit unknown).
type flakyRegister struct {
	*bolt.DB
	mu        sync.Mutex
	failures  []error // returned by the next Registers, in order
	commitToo bool    // a failure still stores the lease
	tries     int
	beats     int
}

func (f *flakyRegister) Register(ctx context.Context, r store.RunnerInfo, now time.Time, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	if len(f.failures) == 0 {
		return f.DB.Register(ctx, r, now, ttl)
	}
	err := f.failures[0]
	f.failures = f.failures[1:]
	if f.commitToo {
		if rerr := f.DB.Register(ctx, r, now, ttl); rerr != nil {
			return rerr
		}
	}
	return err
}

func (f *flakyRegister) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	f.mu.Lock()
	f.beats++
	f.mu.Unlock()
	return f.DB.Heartbeat(ctx, id, now, ttl)
}

// A runner that starts while its database is restarting registers once
// the database is back, and works.
func TestRunRegistersOnceTheStoreIsBack(t *testing.T) {
	unavailable := fmt.Errorf("store: register runner: connection refused: %w", store.ErrUnavailable)
	unknown := fmt.Errorf("store: register runner: connection reset: %w", store.ErrCommitUnknown)
	for _, tc := range []struct {
		name      string
		failures  []error
		commitToo bool
		tries     int
	}{
		{"refused twice", []error{unavailable, unavailable}, false, 3},
		// The lease was stored although the answer was lost: the runner
		// renews it rather than registering a second time.
		{"stored, answer lost", []error{unknown}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := statusTarget(t, http.StatusCreated)
			db := openStore(t)
			j := newJob(tg.URL())
			enqueue(t, db, j)
			fs := &flakyRegister{DB: db, failures: tc.failures, commitToo: tc.commitToo}
			cfg := testConfig(t)
			cfg.LeaseTTL = 240 * time.Millisecond
			cfg.UntilIdle = true
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			if err := runner.New(fs, cfg).Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := getJob(t, db, j.ID); got.State != store.StateSucceeded || tg.N() != 1 {
				t.Errorf("job %s with %d requests at the target; want succeeded with 1", got.State, tg.N())
			}
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if fs.tries != tc.tries {
				t.Errorf("Register called %d times; want %d", fs.tries, tc.tries)
			}
			if tc.commitToo && fs.beats == 0 {
				t.Errorf("no heartbeat renewed the lease stored under the lost answer")
			}
		})
	}
}

// An error that waiting cannot cure ends Run at once.
func TestRunRegisterErrorEndsRun(t *testing.T) {
	db := openStore(t)
	bad := errors.New("store: runner r is already registered")
	fs := &flakyRegister{DB: db, failures: []error{bad}}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	err := runner.New(fs, testConfig(t)).Run(ctx)
	if !errors.Is(err, bad) {
		t.Fatalf("Run = %v; want %v", err, bad)
	}
	if fs.tries != 1 {
		t.Errorf("Register called %d times; want 1", fs.tries)
	}
}
