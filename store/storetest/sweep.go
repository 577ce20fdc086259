package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// testSweep: Sweep deletes up to limit ended jobs updated before
// jobCutoff and nothing else; with keyCutoff at jobCutoff their keys are
// free at once.
func testSweep(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	cutoff := now.Add(100 * time.Second)
	sec := func(n int) time.Time { return now.Add(time.Duration(n) * time.Second) }

	// Old jobs in states a sweep must keep.
	var kept []*store.Job
	for _, j := range driveAll(t, s, "live-", []store.State{store.StateNeedsAttention, store.StateUnknown, store.StateRunning}, sec(1)) {
		kept = append(kept, j)
	}
	// Old end-state jobs, all updated before the cutoff.
	var old []*store.Job
	n := 10
	for i, st := range []store.State{store.StateSucceeded, store.StateSucceeded, store.StateSucceeded, store.StateSucceeded, store.StateFailed, store.StateFailed, store.StateFailed, store.StateCanceled, store.StateCanceled, store.StateCanceled} {
		old = append(old, driveTo(t, s, fmt.Sprintf("old-%d", i), st, sec(n+i)))
	}
	// End-state jobs updated at or after the cutoff.
	var recent []*store.Job
	for i, st := range []store.State{store.StateSucceeded, store.StateCanceled, store.StateFailed} {
		recent = append(recent, driveTo(t, s, fmt.Sprintf("recent-%d", i), st, cutoff.Add(time.Duration(i)*50*time.Second)))
	}
	p := NewJob("live-pending", sec(2))
	p.NextRunAt = cutoff.Add(time.Hour)
	kept = append(kept, enqueue(t, s, p))
	kept = append(kept, recent...)

	res, err := s.Enqueue(ctx, NewJob("old-0", sec(50)))
	if err != nil || !res.Existing || res.Job.ID != old[0].ID {
		t.Fatalf("Enqueue(old-0) before the sweep = %+v, %v; want the existing job", res, err)
	}
	if got, keys, err := s.Sweep(ctx, cutoff, cutoff, 0); err != nil || got != 0 || keys != 0 {
		t.Errorf("Sweep(limit 0) = %d, %d, %v; want 0, 0", got, keys, err)
	}
	// Every old job was updated before keyCutoff: no key stays reserved,
	// so there is no reservation to delete either.
	total := 0
	for _, want := range []int{4, 4, 2, 0} {
		got, keys, err := s.Sweep(ctx, cutoff, cutoff, 4)
		if err != nil || got != want || keys != 0 {
			t.Errorf("Sweep(limit 4) = %d, %d, %v; want %d, 0", got, keys, err, want)
		}
		total += got
	}
	if total != len(old) {
		t.Errorf("swept %d jobs in all; want %d", total, len(old))
	}
	for _, j := range old {
		if _, err := s.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) after sweep: err = %v; want ErrNotFound", j.Key, err)
		}
		if _, err := s.GetByKey(j.Key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetByKey(%s) after sweep: err = %v; want ErrNotFound", j.Key, err)
		}
	}
	for _, j := range kept {
		wantUnchanged(t, s, j, "Sweep of "+j.Key)
	}
	want := map[store.State]int64{
		store.StatePending: 1, store.StateRunning: 1, store.StateUnknown: 1, store.StateNeedsAttention: 1,
		store.StateSucceeded: 1, store.StateFailed: 1, store.StateCanceled: 1,
	}
	if st := stats(t, s); !statsEqual(st, want) {
		t.Errorf("Stats after sweep = %v; want %v", st, want)
	}

	// A swept job's key is free again: the same key makes a new job.
	again := NewJob("old-0", cutoff.Add(time.Hour))
	res, err = s.Enqueue(ctx, again)
	if err != nil || res.Existing || res.Job.ID != again.ID || res.Job.ID == old[0].ID {
		t.Errorf("Enqueue(old-0) after the sweep = %+v, %v; want a new job %s", res, err, again.ID)
	}
}

// testSweepKeyReservations: the key of a swept job stays reserved while
// keyCutoff has not passed the job (a new job under it is a key conflict
// naming the deleted job, and no job is found by it); a later Sweep
// deletes the reservations and counts them, and the key is free again.
func testSweepKeyReservations(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	var swept []*store.Job
	for i, st := range []store.State{store.StateSucceeded, store.StateFailed, store.StateCanceled} {
		swept = append(swept, driveTo(t, s, fmt.Sprintf("swept-%d", i), st, now.Add(time.Duration(i+1)*time.Second)))
	}
	jobCutoff := now.Add(time.Hour)
	if n, keys, err := s.Sweep(ctx, jobCutoff, now, 10); err != nil || n != len(swept) || keys != 0 {
		t.Fatalf("Sweep(jobs before +1h, keys kept after +0) = %d, %d, %v; want %d jobs, 0 keys", n, keys, err, len(swept))
	}
	for _, j := range swept {
		if _, err := s.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) after the sweep: err = %v; want ErrNotFound", j.Key, err)
		}
		if _, err := s.GetByKey(j.Key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetByKey(%s), reserved: err = %v; want ErrNotFound", j.Key, err)
		}
		for _, fp := range []string{j.Fingerprint, "fp-other"} {
			again := NewJob(j.Key, jobCutoff)
			again.Fingerprint = fp
			res, err := s.Enqueue(ctx, again)
			var kc *store.KeyConflictError
			if !errors.As(err, &kc) || !errors.Is(err, store.ErrKeyConflict) || kc.Key != j.Key || kc.JobID != j.ID || kc.Deleted.IsZero() {
				t.Errorf("Enqueue(%s, %s) under a reserved key = %+v, %v; want a *KeyConflictError naming the deleted job %s, with Deleted set", j.Key, fp, res, err, j.ID)
			}
		}
	}
	if st := stats(t, s); !statsEqual(st, map[store.State]int64{}) {
		t.Errorf("Stats with only reserved keys = %v; want all zero", st)
	}
	if n, keys, err := s.Sweep(ctx, jobCutoff, now, 10); err != nil || n != 0 || keys != 0 {
		t.Errorf("Sweep again, keys still kept = %d, %d, %v; want 0, 0", n, keys, err)
	}
	if n, keys, err := s.Sweep(ctx, jobCutoff, jobCutoff, 10); err != nil || n != 0 || keys != len(swept) {
		t.Errorf("Sweep(keys before +1h) = %d, %d, %v; want 0 jobs, %d keys", n, keys, err, len(swept))
	}
	if n, keys, err := s.Sweep(ctx, jobCutoff, jobCutoff, 10); err != nil || n != 0 || keys != 0 {
		t.Errorf("Sweep once more = %d, %d, %v; want 0, 0", n, keys, err)
	}
	for _, j := range swept {
		again := NewJob(j.Key, jobCutoff)
		if res, err := s.Enqueue(ctx, again); err != nil || res.Existing || res.Job.ID != again.ID {
			t.Errorf("Enqueue(%s) after its reservation ended = %+v, %v; want the new job %s", j.Key, res, err, again.ID)
		}
	}
}
