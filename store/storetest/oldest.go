package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// testOldestDue: OldestDue is the earliest NextRunAt among the jobs of a
// state, pending or unknown, due or not, and the zero time when it has
// none; it follows claims, finishes and cancels.
func testOldestDue(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	want := func(st store.State, w time.Time, when string) {
		t.Helper()
		got, err := s.OldestDue(st)
		if err != nil || !got.Equal(w) || got.IsZero() != w.IsZero() {
			t.Errorf("OldestDue(%s) %s = %v, %v; want %v", st, when, got, err, w)
		}
	}
	want(store.StatePending, time.Time{}, "of a new store")
	want(store.StateUnknown, time.Time{}, "of a new store")

	sec := func(n int) time.Time { return now.Add(time.Duration(n) * time.Second) }
	u1 := driveTo(t, s, "u1", store.StateUnknown, sec(-10))
	u2 := driveTo(t, s, "u2", store.StateUnknown, sec(-20))
	want(store.StatePending, time.Time{}, "with only unknown jobs")
	want(store.StateUnknown, sec(-20), "with unknown jobs due -20s and -10s")
	var pending []*store.Job
	for _, n := range []int{3, 1, 2} {
		j := NewJob(fmt.Sprintf("p%d", n), now)
		j.NextRunAt = sec(n)
		pending = append(pending, enqueue(t, s, j))
	}
	want(store.StatePending, sec(1), "with pending jobs due +3s, +1s, +2s")

	c := claim(t, s, store.StatePending, pending[1].ID, sec(1))
	want(store.StatePending, sec(2), "after the +1s job was claimed")
	cu := claim(t, s, store.StateUnknown, u2.ID, now)
	if _, err := finishAt(s, u2.ID, cu.Fence, func(j *store.Job) error { j.NextRunAt = sec(3600); return nil }); err != nil {
		t.Fatalf("FinishClaim(u2, in progress): %v", err)
	}
	want(store.StateUnknown, u1.NextRunAt, "after u2 was put off an hour")
	finish(t, s, c.Job.ID, c.Fence, store.StateSucceeded, sec(1))
	want(store.StatePending, sec(2), "after a finish to succeeded")
	for _, j := range []*store.Job{pending[0], pending[2]} {
		if _, err := s.Cancel(ctx, j.ID, sec(5), "storetest", ""); err != nil {
			t.Fatalf("Cancel(%s): %v", j.Key, err)
		}
	}
	want(store.StatePending, time.Time{}, "after the last pending jobs were canceled")
}
