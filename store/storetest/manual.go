package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// driveAll drives one job into each of states, in an order where no drive
// claims another's job, one second apart from now. Pending comes last, so
// later drives never claim it.
func driveAll(t *testing.T, s Store, prefix string, states []store.State, now time.Time) map[store.State]*store.Job {
	t.Helper()
	order := []store.State{store.StateNeedsAttention, store.StateUnknown, store.StateRunning, store.StateSucceeded, store.StateFailed, store.StateCanceled, store.StatePending}
	out := map[store.State]*store.Job{}
	for i, st := range order {
		for _, want := range states {
			if want == st {
				out[st] = driveTo(t, s, prefix+string(st), st, now.Add(time.Duration(i)*time.Second))
			}
		}
	}
	return out
}

func except(skip ...store.State) []store.State {
	var out []store.State
	for _, s := range store.States() {
		if !contains(skip, s) {
			out = append(out, s)
		}
	}
	return out
}

func contains(list []store.State, s store.State) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func wantManualEvent(t *testing.T, j *store.Job, from, to store.State, actor, note string, at time.Time) {
	t.Helper()
	ev := j.LastEvent(store.EventManual)
	if ev == nil || ev.From != from || ev.To != to || ev.Actor != actor || ev.Note != note || !ev.Start.Equal(at) {
		t.Errorf("job %s manual event = %+v; want %s → %s by %q (%q) at %v", j.Key, ev, from, to, actor, note, at)
	}
	if !j.UpdatedAt.Equal(at) {
		t.Errorf("job %s UpdatedAt = %v; want %v", j.Key, j.UpdatedAt, at)
	}
}

func testCancel(t *testing.T, open func(t *testing.T) Store) {
	now := T0()
	later := now.Add(time.Hour)
	t.Run("pending", func(t *testing.T) {
		s := open(t)
		j := enqueue(t, s, NewJob("p", now))
		got, err := s.Cancel(ctx, j.ID, later, "alice", "typo in amount")
		if err != nil || got.State != store.StateCanceled {
			t.Fatalf("Cancel(pending) = %+v, %v; want canceled", got, err)
		}
		stored := get(t, s, j.ID)
		if !JobsEqual(stored, got) {
			t.Errorf("Cancel returned %+v; stored %+v", got, stored)
		}
		wantManualEvent(t, stored, store.StatePending, store.StateCanceled, "alice", "typo in amount", later)
		if !strings.Contains(stored.Reason, "alice") {
			t.Errorf("Reason = %q; want it to name alice", stored.Reason)
		}
		if st := stats(t, s); st[store.StateCanceled] != 1 || st[store.StatePending] != 0 {
			t.Errorf("Stats = %v; want 1 canceled", st)
		}
	})
	t.Run("after no-effect attempt", func(t *testing.T) {
		s := open(t)
		j := driveTo(t, s, "n", store.StateRunning, now)
		finish(t, s, j.ID, j.Fence, store.StatePending, now.Add(time.Second))
		if got, err := s.Cancel(ctx, j.ID, later, "alice", ""); err != nil || got.State != store.StateCanceled {
			t.Errorf("Cancel(pending after a no-effect attempt) = %+v, %v; want canceled", got, err)
		}
	})
	t.Run("may have effect", func(t *testing.T) {
		s := open(t)
		j := driveTo(t, s, "m", store.StateUnknown, now)
		c := claim(t, s, store.StateUnknown, j.ID, now)
		// Replay scheduled inside the key TTL: pending, but the first
		// attempt may have taken effect.
		j = finish(t, s, j.ID, c.Fence, store.StatePending, now.Add(time.Second))
		if !j.MayHaveEffect {
			t.Fatalf("replay-pending job lost MayHaveEffect")
		}
		_, err := s.Cancel(ctx, j.ID, later, "alice", "")
		wantIllegal(t, err, "Cancel(pending, MayHaveEffect)")
		wantUnchanged(t, s, j, "refused Cancel")
	})
	t.Run("other states", func(t *testing.T) {
		s := open(t)
		jobs := driveAll(t, s, "o-", except(store.StatePending), now)
		before := stats(t, s)
		for st, j := range jobs {
			_, err := s.Cancel(ctx, j.ID, later, "alice", "")
			wantIllegal(t, err, "Cancel("+string(st)+")")
			wantUnchanged(t, s, j, "refused Cancel("+string(st)+")")
		}
		if after := stats(t, s); !statsEqual(after, before) {
			t.Errorf("Stats after refused cancels = %v; want %v", after, before)
		}
	})
}

func testRetry(t *testing.T, open func(t *testing.T) Store) {
	now := T0()
	t.Run("failed", func(t *testing.T) {
		s := open(t)
		j := driveTo(t, s, "r", store.StateRunning, now)
		// Three no-effect attempts, then a permanent failure with a result.
		for i := 1; i < 3; i++ {
			at := now.Add(time.Duration(i) * time.Minute)
			finish(t, s, j.ID, j.Fence, store.StatePending, at)
			j = claim(t, s, store.StatePending, j.ID, at).Job
		}
		if j.Attempts != 3 || j.AttemptsLeft() != 2 {
			t.Fatalf("after 3 claims: attempts %d, left %d; want 3, 2", j.Attempts, j.AttemptsLeft())
		}
		failedAt := now.Add(5 * time.Minute)
		if _, err := finishAt(s, j.ID, j.Fence, func(j *store.Job) error {
			if err := moveTo(store.StateFailed, failedAt)(j); err != nil {
				return err
			}
			j.Result = &store.Result{HTTPStatus: 400, Body: []byte("bad"), Source: "attempt"}
			return nil
		}); err != nil {
			t.Fatalf("Finish(failed): %v", err)
		}
		at := now.Add(time.Hour)
		got, err := s.Retry(ctx, j.ID, at, "bob", "fixed the target")
		if err != nil {
			t.Fatalf("Retry(failed): %v", err)
		}
		stored := get(t, s, j.ID)
		if !JobsEqual(stored, got) {
			t.Errorf("Retry returned %+v; stored %+v", got, stored)
		}
		switch {
		case stored.State != store.StatePending || stored.Key != "r" || stored.ID != j.ID:
			t.Errorf("after Retry: %s, key %q, id %s; want pending, same key and id", stored.State, stored.Key, stored.ID)
		case stored.AttemptsLeft() != stored.MaxAttempts || stored.Attempts != 3:
			t.Errorf("after Retry: attempts %d, left %d; want 3 and a fresh budget of %d", stored.Attempts, stored.AttemptsLeft(), stored.MaxAttempts)
		case !stored.Deadline.Equal(at.Add(stored.DeadlineAfter)) || !stored.NextRunAt.Equal(at):
			t.Errorf("after Retry: deadline %v, next run %v; want %v, %v", stored.Deadline, stored.NextRunAt, at.Add(stored.DeadlineAfter), at)
		case stored.Reason != "" || stored.Result != nil:
			t.Errorf("after Retry: reason %q, result %+v; want both cleared", stored.Reason, stored.Result)
		}
		wantManualEvent(t, stored, store.StateFailed, store.StatePending, "bob", "fixed the target", at)
		c := claim(t, s, store.StatePending, j.ID, at)
		if c.Job.Attempts != 4 || c.Job.AttemptsLeft() != c.Job.MaxAttempts-1 {
			t.Errorf("claim after Retry: attempts %d, left %d; want 4, %d", c.Job.Attempts, c.Job.AttemptsLeft(), c.Job.MaxAttempts-1)
		}
	})
	t.Run("other states", func(t *testing.T) {
		s := open(t)
		jobs := driveAll(t, s, "o-", except(store.StateFailed), now)
		before := stats(t, s)
		for st, j := range jobs {
			_, err := s.Retry(ctx, j.ID, now.Add(time.Hour), "bob", "")
			wantIllegal(t, err, "Retry("+string(st)+")")
			wantUnchanged(t, s, j, "refused Retry("+string(st)+")")
		}
		if after := stats(t, s); !statsEqual(after, before) {
			t.Errorf("Stats after refused retries = %v; want %v", after, before)
		}
	})
}

func testResolve(t *testing.T, open func(t *testing.T) Store) {
	now := T0()
	at := now.Add(time.Hour)
	for _, as := range []store.State{store.StateSucceeded, store.StateFailed} {
		t.Run(string(as), func(t *testing.T) {
			s := open(t)
			j := driveTo(t, s, "n", store.StateNeedsAttention, now)
			if !j.MayHaveEffect {
				t.Fatalf("needs_attention job from unknown lacks MayHaveEffect")
			}
			got, err := s.Resolve(ctx, j.ID, as, at, "carol", "checked the dashboard")
			if err != nil || got.State != as {
				t.Fatalf("Resolve(%s) = %+v, %v", as, got, err)
			}
			stored := get(t, s, j.ID)
			if !JobsEqual(stored, got) {
				t.Errorf("Resolve returned %+v; stored %+v", got, stored)
			}
			if stored.MayHaveEffect || !strings.Contains(stored.Reason, "carol") || !strings.Contains(stored.Reason, "checked the dashboard") {
				t.Errorf("after Resolve: MayHaveEffect %v, reason %q; want false and a reason naming carol and her note", stored.MayHaveEffect, stored.Reason)
			}
			wantManualEvent(t, stored, store.StateNeedsAttention, as, "carol", "checked the dashboard", at)
			if st := stats(t, s); st[as] != 1 || st[store.StateNeedsAttention] != 0 {
				t.Errorf("Stats = %v; want 1 %s", st, as)
			}
		})
	}
	t.Run("not as succeeded or failed", func(t *testing.T) {
		s := open(t)
		j := driveTo(t, s, "n", store.StateNeedsAttention, now)
		for _, as := range []store.State{store.StatePending, store.StateRunning, store.StateUnknown, store.StateNeedsAttention, store.StateCanceled, "bogus"} {
			if got, err := s.Resolve(ctx, j.ID, as, at, "carol", ""); err == nil {
				t.Errorf("Resolve as %s = %+v; want a refusal", as, got)
			}
			wantUnchanged(t, s, j, "Resolve as "+string(as))
		}
	})
	t.Run("other states", func(t *testing.T) {
		s := open(t)
		jobs := driveAll(t, s, "o-", except(store.StateNeedsAttention), now)
		before := stats(t, s)
		for st, j := range jobs {
			for _, as := range []store.State{store.StateSucceeded, store.StateFailed} {
				_, err := s.Resolve(ctx, j.ID, as, at, "carol", "")
				wantIllegal(t, err, "Resolve("+string(st)+" as "+string(as)+")")
				wantUnchanged(t, s, j, "refused Resolve("+string(st)+")")
			}
		}
		if after := stats(t, s); !statsEqual(after, before) {
			t.Errorf("Stats after refused resolves = %v; want %v", after, before)
		}
	})
}
