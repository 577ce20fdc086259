package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// SortTime is the time List orders a job by within its state, newest
// first: next_run_at for pending and unknown jobs, updated_at (the claim or
// the end) for the others. Equal times order by id, highest first.
func SortTime(j *store.Job) time.Time {
	if j.State == store.StatePending || j.State == store.StateUnknown {
		return j.NextRunAt
	}
	return j.UpdatedAt
}

// newerFirst reports whether a comes strictly before b in a state's list.
func newerFirst(a, b *store.Job) bool {
	ta, tb := SortTime(a), SortTime(b)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.ID > b.ID
}

// listAll reads every page of f and checks the page shape as it goes.
func listAll(t *testing.T, s Store, f store.ListFilter, total int) []*store.Job {
	t.Helper()
	var out []*store.Job
	for pages := 0; ; pages++ {
		if pages > total+2 {
			t.Fatalf("List(%v, limit %d) still paging after %d pages of %d jobs", f.States, f.Limit, pages, total)
		}
		p, err := s.List(f)
		if err != nil {
			t.Fatalf("List(%v, limit %d, page %d): %v", f.States, f.Limit, pages, err)
		}
		if len(p.Jobs) > f.Limit || (p.Next != "" && len(p.Jobs) != f.Limit) {
			t.Fatalf("List(%v, limit %d) page %d has %d jobs, next %q; want full pages until the last", f.States, f.Limit, pages, len(p.Jobs), p.Next)
		}
		out = append(out, p.Jobs...)
		if p.Next == "" {
			return out
		}
		f.Cursor = p.Next
	}
}

func testListPagination(t *testing.T, open func(t *testing.T) Store) {
	const n = 250
	s := open(t)
	now := T0()
	r := rand.New(rand.NewPCG(7, 11))
	perm := r.Perm(n)
	var batch []*store.Job
	for i := range n {
		j := NewJob(fmt.Sprintf("l-%03d", i), now)
		j.NextRunAt = now.Add(time.Duration(perm[i]) * time.Second)
		batch = append(batch, j)
	}
	if rs, err := s.EnqueueMany(ctx, batch); err != nil || len(rs) != n {
		t.Fatalf("EnqueueMany = %d results, %v", len(rs), err)
	}
	// Claims in rounds, so running jobs have several claim times (and ties).
	var claims []store.Claim
	for k := range 15 {
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Duration(10*(k+1)) * time.Second), Limit: 8})
		if err != nil {
			t.Fatalf("ClaimDue: %v", err)
		}
		claims = append(claims, cs...)
	}
	outcomes := []store.State{store.StateSucceeded, store.StateFailed, store.StateUnknown, store.StateNeedsAttention, store.StatePending, store.StateRunning}
	for i, c := range claims {
		if st := outcomes[i%len(outcomes)]; st != store.StateRunning {
			finish(t, s, c.Job.ID, c.Fence, st, now.Add(time.Duration(1000+r.IntN(200))*time.Second))
		}
	}
	for i, j := range batch {
		if i%5 == 0 && get(t, s, j.ID).State == store.StatePending {
			if _, err := s.Cancel(ctx, j.ID, now.Add(time.Duration(4000+i)*time.Second), "t", ""); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
		}
	}

	ref := listAll(t, s, store.ListFilter{Limit: store.MaxListLimit}, n)
	if len(ref) != n {
		t.Fatalf("List of everything = %d jobs; want %d", len(ref), n)
	}
	counts := map[store.State]int64{}
	for _, j := range ref {
		counts[j.State]++
	}
	for _, st := range store.States() {
		if counts[st] == 0 {
			t.Fatalf("setup left no %s job: %v", st, counts)
		}
	}
	if got := stats(t, s); !statsEqual(got, counts) {
		t.Errorf("Stats = %v; List counts %v", got, counts)
	}

	filters := [][]store.State{
		nil,
		{store.StatePending},
		{store.StateSucceeded, store.StateFailed},
		{store.StateRunning, store.StateUnknown, store.StateCanceled, store.StatePending},
		{store.StateNeedsAttention},
		store.States(),
	}
	for _, states := range filters {
		var want map[string]bool = map[string]bool{}
		for _, j := range ref {
			if len(states) == 0 || contains(states, j.State) {
				want[j.ID] = true
			}
		}
		for _, limit := range []int{1, 7, 100} {
			got := listAll(t, s, store.ListFilter{States: states, Limit: limit}, n)
			name := fmt.Sprintf("List(%v, limit %d)", states, limit)
			seen := map[string]bool{}
			for _, j := range got {
				if seen[j.ID] {
					t.Errorf("%s: job %s twice", name, j.Key)
				}
				seen[j.ID] = true
				if !want[j.ID] {
					t.Errorf("%s: job %s (%s) not selected by the filter", name, j.Key, j.State)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("%s: %d distinct jobs; want %d", name, len(seen), len(want))
			}
			for i := 1; i < len(got); i++ {
				a, b := got[i-1], got[i]
				if len(states) == 0 {
					if a.ID <= b.ID {
						t.Errorf("%s: %s before %s; want ids newest first", name, a.ID, b.ID)
					}
					continue
				}
				pa, pb := indexOf(states, a.State), indexOf(states, b.State)
				if pa > pb || (pa == pb && !newerFirst(a, b)) {
					t.Errorf("%s: %s (%s, %v) before %s (%s, %v); want states in filter order, newest first within each", name, a.Key, a.State, SortTime(a), b.Key, b.State, SortTime(b))
				}
			}
		}
	}

	for _, f := range []store.ListFilter{
		{Cursor: "zz"},
		{Cursor: "00ff"},
		{Limit: store.MaxListLimit + 1},
		{States: []store.State{"bogus"}},
	} {
		if p, err := s.List(f); err == nil {
			t.Errorf("List(%+v) = %d jobs; want an error", f, len(p.Jobs))
		}
	}
}

func indexOf(list []store.State, s store.State) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
