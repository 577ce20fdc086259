package runner_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// The store fails (its file is deleted) during an outcome write, with no
// other due job: Run stops with store.ErrFailed, not nil (the store is
// idle only in the deleted file).
func TestRunStopsWhenOutcomeWriteFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemrun.db")
	db, err := store.Open(path, nil)
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
	cfg.UntilIdle = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err = runner.New(db, cfg).Run(ctx)
	t.Logf("Run = %v after %s (ctx err %v), target saw %d", err, time.Since(start).Round(time.Millisecond), ctx.Err(), tg.N())
	if !errors.Is(err, store.ErrFailed) {
		t.Errorf("Run = %v; want store.ErrFailed (the store takes no writes since the outcome write)", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Run only returned when its context ran out (hung)")
	}
}

// Same, without UntilIdle: Run stops with store.ErrFailed at once instead
// of polling a failed store until its context ends.
func TestRunStopsOnFailedStoreWithoutIdle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemrun.db")
	db, err := store.Open(path, nil)
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
	cfg.UntilIdle = false
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err = runner.New(db, cfg).Run(ctx)
	_, eerr := db.Enqueue(context.Background(), newJob(tg.URL()))
	t.Logf("Run = %v after %s (ctx err %v); Enqueue now = %v", err, time.Since(start).Round(time.Millisecond), ctx.Err(), eerr)
	if !errors.Is(err, store.ErrFailed) || ctx.Err() != nil {
		t.Errorf("Run = %v, ctx %v; want store.ErrFailed before the context ends", err, ctx.Err())
	}
}
