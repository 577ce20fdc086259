package runner_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// The store fails (its file is deleted) during an outcome write, with no
// other due job: Run stops with store.ErrFailed before its context ends,
// with UntilIdle (not nil: the store is idle only in the deleted file) and
// without it (instead of polling a failed store until the context ends).
func TestRunStopsWhenOutcomeWriteFails(t *testing.T) {
	for _, untilIdle := range []bool{true, false} {
		t.Run(fmt.Sprintf("until-idle=%v", untilIdle), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idemrun.db")
			db, err := bolt.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
				os.Remove(path)
				w.WriteHeader(200)
			})
			enqueue(t, db, newJob(tg.URL()))
			cfg := testConfig(t)
			cfg.UntilIdle = untilIdle
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err = runner.New(db, cfg).Run(ctx)
			if !errors.Is(err, store.ErrFailed) || ctx.Err() != nil {
				t.Errorf("Run = %v, ctx %v; want store.ErrFailed before the context ends", err, ctx.Err())
			}
			if _, eerr := db.Enqueue(context.Background(), newJob(tg.URL())); !errors.Is(eerr, store.ErrFailed) {
				t.Errorf("Enqueue after the failure: %v, want store.ErrFailed", eerr)
			}
		})
	}
}

// TestOutcomeWriteRetried: an outcome commit that fails once is written
// again; the job does not stay running while the runner lives, and the
// request is sent once.
func TestOutcomeWriteRetried(t *testing.T) {
	t.Parallel()
	var failNext atomic.Bool
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), &bolt.Options{CommitHook: func(int) error {
		if failNext.CompareAndSwap(true, false) {
			return errors.New("disk hiccup")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		failNext.Store(true) // the next commit is this attempt's outcome
		w.WriteHeader(http.StatusCreated)
	})
	j := newJob(tg.URL())
	enqueue(t, db, j)
	runIdleWithin(t, db, testConfig(t), 10*time.Second)
	wantState(t, getJob(t, db, j.ID), store.StateSucceeded)
	if n := tg.N(); n != 1 {
		t.Errorf("target received %d sends, want 1", n)
	}
}
