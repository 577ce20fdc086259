package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// unconfirmedClaim is a store whose first claim of pending jobs commits
// and then reports store.ErrCommitUnknown, as a connection to a database
// that ends during the COMMIT.
type unconfirmedClaim struct {
	*bolt.DB
	done atomic.Bool
}

func (u *unconfirmedClaim) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	cs, err := u.DB.ClaimDue(ctx, req)
	if err == nil && len(cs) > 0 && req.State == store.StatePending && u.done.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("store: commit: connection reset: %w", store.ErrCommitUnknown)
	}
	return cs, err
}

// A job whose claim committed while the runner heard ErrCommitUnknown is
// running under the runner's live lease, and no rescue would take it: the
// runner adopts it at its next heartbeat into unknown, asks the status
// endpoint (nothing was sent), and then sends it once.
func TestRunAdoptsClaimsWhoseCommitWasUnconfirmed(t *testing.T) {
	db := openStore(t)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/status/{key}" })
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.LeaseTTL = 300 * time.Millisecond
	cfg.UntilIdle = true
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if err := runner.New(&unconfirmedClaim{DB: db}, cfg).Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v)", err, ctx.Err())
	}

	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	var posts, gets int
	for _, rec := range tg.received() {
		if rec.Method == http.MethodPost {
			posts++
		} else {
			gets++
		}
	}
	if posts != 1 || gets < 1 {
		t.Errorf("target saw %d creates and %d status queries; want 1 create, after at least 1 status query", posts, gets)
	}
	adopted := false
	for _, ev := range got.History {
		if ev.Kind == store.EventRecovery && strings.Contains(ev.Detail, "commit was not confirmed") {
			adopted = true
		}
	}
	if !adopted {
		t.Errorf("no recovery event for the unconfirmed claim in the history: %+v", got.History)
	}
}
