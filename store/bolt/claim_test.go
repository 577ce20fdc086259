package bolt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/storetest"
)

// A Prepare that panics must not leave the claiming mark of the job it was
// preparing: ClaimDue reports the panic, and the next ClaimDue claims the
// job (a leaked mark would pass it over until the file is reopened).
func TestClaimDueUnmarksAfterAPanic(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("k1", now)
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	_, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1, Prepare: func(*store.Job) { panic("bug in prepare") }})
	if err == nil {
		t.Fatal("ClaimDue with a panicking Prepare: no error")
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Minute), Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Errorf("ClaimDue after the failed round = %d claims, %v; want the due job claimed", len(cs), err)
	}
}

// ClaimDue checks the owner's lease inside its write too: a Rescue (by
// another runner of the handle, at a later clock) that drops the lease
// while the claim is prepared stops the claim.
func TestClaimDueRechecksTheLeaseInItsWrite(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	if _, err := db.Enqueue(ctx, storetest.NewJob("k1", now)); err != nil {
		t.Fatal(err)
	}
	a := store.RunnerInfo{ID: "runner-a", Workers: 1}
	if err := db.Register(ctx, a, now, time.Second); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1, Owner: a.ID,
		Prepare: func(*store.Job) {
			// Meanwhile, another runner's heartbeat rescue, two seconds on.
			if _, err := db.Rescue(ctx, now.Add(2*time.Second), nil); err != nil {
				t.Error(err)
			}
		}})
	leases, _ := db.Leases()
	if len(cs) != 0 || !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("ClaimDue = %d claims, %v, leases now %d; want no claim and ErrLeaseLost: the owner's lease was gone before the claim committed", len(cs), err, len(leases))
	}
}
