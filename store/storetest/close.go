package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// testClose: after Close, every method of the contract answers ErrClosed,
// with arguments that an open store would take.
func testClose(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	r := register(t, s, now, time.Hour)
	j := enqueue(t, s, NewJob("k", now))
	c := claimFor(t, s, store.StatePending, j.ID, r.ID, now)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	later := now.Add(time.Second)
	fresh := func() *store.Job { return NewJob("after-close", later) }
	calls := map[string]func() error{
		"Enqueue": func() error { _, err := s.Enqueue(ctx, fresh()); return err },
		"EnqueueMany": func() error {
			_, err := s.EnqueueMany(ctx, []*store.Job{fresh()})
			return err
		},
		"EnqueueManyFunc": func() error {
			_, err := s.EnqueueManyFunc(ctx, 1, func(int) (*store.Job, error) { return fresh(), nil })
			return err
		},
		"Get":      func() error { _, err := s.Get(j.ID); return err },
		"GetByKey": func() error { _, err := s.GetByKey(j.Key); return err },
		"List":     func() error { _, err := s.List(store.ListFilter{}); return err },
		"Stats":    func() error { _, err := s.Stats(); return err },
		"MatchIDs": func() error {
			_, _, err := s.MatchIDs(store.ListFilter{States: []store.State{store.StatePending}}, 10)
			return err
		},
		"ManualMany": func() error {
			_, err := s.ManualMany(ctx, []string{j.ID}, store.RetryJob(later, "storetest", ""))
			return err
		},
		"OldestDue": func() error { _, err := s.OldestDue(store.StatePending); return err },
		"Cancel":    func() error { _, err := s.Cancel(ctx, j.ID, later, "storetest", ""); return err },
		"Retry":     func() error { _, err := s.Retry(ctx, j.ID, later, "storetest", ""); return err },
		"Resolve": func() error {
			_, err := s.Resolve(ctx, j.ID, store.StateSucceeded, later, "storetest", "")
			return err
		},
		"Sweep":          func() error { _, _, err := s.Sweep(ctx, later, later, 10); return err },
		"SensitiveNames": func() error { _, _, err := s.SensitiveNames(); return err },
		"AddSensitiveNames": func() error {
			_, err := s.AddSensitiveNames([]string{"X-After-Close"}, []string{"after_close"})
			return err
		},
		"Register": func() error {
			return s.Register(ctx, store.RunnerInfo{ID: store.NewID(), Workers: 1}, later, time.Hour)
		},
		"Heartbeat":  func() error { return s.Heartbeat(ctx, r.ID, later, time.Hour) },
		"Deregister": func() error { return s.Deregister(ctx, r.ID) },
		"Leases":     func() error { _, err := s.Leases(); return err },
		"Rescue":     func() error { _, err := s.Rescue(ctx, later, nil); return err },
		"ClaimDue": func() error {
			_, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: later, Limit: 1})
			return err
		},
		"FinishClaim": func() error {
			_, _, err := s.FinishClaim(ctx, c, moveTo(store.StateSucceeded, later), &store.NextClaim{Now: later, Owner: r.ID})
			return err
		},
		"Check": func() error { _, err := s.Check(); return err },
	}
	calls["HostPolicies"] = func() error { _, err := s.HostPolicies(); return err }
	calls["UpdateHostPolicy"] = func() error {
		_, err := s.UpdateHostPolicy(ctx, "after-close.example.com", func(*store.HostPolicy, bool) error { return nil })
		return err
	}
	calls["UnsetHostPolicy"] = func() error { return s.UnsetHostPolicy(ctx, "after-close.example.com") }
	fl, hasLater := s.(store.FinishLater)
	if hasLater {
		calls["FinishClaimLater"] = func() error {
			return fl.FinishClaimLater(c, moveTo(store.StateSucceeded, later), func(*store.Job, error) {
				t.Error("FinishClaimLater after Close called done; want the call refused, nothing queued")
			})
		}
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: err = %v; want errors.Is ErrClosed", name, err)
		}
	}
	// Every method but Close itself is called above (FinishClaimLater
	// where the backend has it).
	for m := range methodTests {
		if _, ok := calls[m]; !ok && m != "Close" && (m != "FinishClaimLater" || hasLater) {
			t.Errorf("testClose does not call %s after Close", m)
		}
	}
}
