package bolt_test

import (
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/storetest"
)

// A person's retry, recorded as a manual event, is kept in the
// history of a long-lived job when it is trimmed: who steered it stays.
func TestHistoryTrimKeepsManualEvents(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("long", now)
	j.MaxAttempts = 1000
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	cycle := func(to store.State) {
		now = now.Add(time.Second)
		cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1, Prepare: func(j *store.Job) {
			j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
		}})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim: %v %d", err, len(cs))
		}
		if _, _, err := db.FinishClaim(ctx, cs[0], func(j *store.Job) error {
			j.History[len(j.History)-1].End = now
			j.State, j.NextRunAt, j.UpdatedAt = to, now, now
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		cycle(store.StatePending)
	}
	cycle(store.StateFailed)
	if _, err := db.Retry(ctx, j.ID, now, "alice", "checked with the bank"); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		cycle(store.StatePending)
	}
	got, _ := db.Get(j.ID)
	if got.LastEvent(store.EventManual) == nil {
		t.Fatalf("after %d events (%d dropped), alice's retry is gone from the history", len(got.History), got.HistoryDropped)
	}
}
