package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// filterJobs makes jobs in every state on three target hosts, two key
// prefixes and update times a second apart from T0; the unknown and
// needs_attention ones ask a status endpoint on a fourth host, so a host
// filter must read the target's URL, not the host claims go to. It
// returns them by id.
func filterJobs(t *testing.T, s Store) map[string]*store.Job {
	t.Helper()
	urls := []string{"http://a.test/x", "https://B.Test:443/y", "http://a.test:8080/z"}
	// The order of driveAll: no drive claims another's job.
	order := []store.State{store.StateNeedsAttention, store.StateUnknown, store.StateRunning, store.StateSucceeded, store.StateFailed, store.StateCanceled, store.StatePending}
	now := T0()
	out := map[string]*store.Job{}
	i := 0
	for _, st := range order {
		for k := range 6 {
			prefix := "lf-even-"
			if i%2 == 1 {
				prefix = "lf-odd-"
			}
			at := now.Add(time.Duration(i) * time.Second)
			j := NewJob(fmt.Sprintf("%s%02d", prefix, i), at)
			j.Request.URL = urls[(i+k)%len(urls)]
			if st == store.StateUnknown || st == store.StateNeedsAttention {
				j.StatusURL = "http://status.test/s?key={key}"
			}
			j = driveJob(t, s, j, st, "", at)
			out[j.ID] = j
			i++
		}
	}
	return out
}

// listPages reads every page of f, allowing a page shorter than its
// limit when it has a Next (a narrowed list that passed over ListScan
// jobs), and fails on a job listed twice.
func listPages(t *testing.T, s Store, f store.ListFilter, total int) []*store.Job {
	t.Helper()
	var out []*store.Job
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > total+2 {
			t.Fatalf("List(%+v) still paging after %d pages of %d jobs", f, pages, total)
		}
		p, err := s.List(f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		if len(p.Jobs) > f.Limit {
			t.Fatalf("List(%+v) = %d jobs; over the limit", f, len(p.Jobs))
		}
		for _, j := range p.Jobs {
			if seen[j.ID] {
				t.Fatalf("List(%+v): job %s on two pages", f, j.Key)
			}
			seen[j.ID] = true
		}
		out = append(out, p.Jobs...)
		if p.Next == "" {
			return out
		}
		f.Cursor = p.Next
	}
}

func keysOf(js []*store.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.Key
	}
	return out
}

func testListFilters(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	jobs := filterJobs(t, s)
	n := len(jobs)
	now := T0()
	var someID string
	for id := range jobs {
		someID = id
		break
	}
	narrow := []store.ListFilter{
		{Host: "a.test"},
		{Host: "b.test"},
		{Host: "a.test:8080"},
		{Host: "status.test"},
		{Since: now.Add(10 * time.Second)},
		{Until: now.Add(20 * time.Second)},
		{Since: now.Add(5 * time.Second), Until: now.Add(33 * time.Second)},
		{KeyPrefix: "lf-odd-"},
		{KeyPrefix: "lf-even-1"},
		{IDPrefix: someID[:14]},
		{IDPrefix: someID},
		{IDPrefix: "zz"},
		{Host: "a.test", KeyPrefix: "lf-even-", Since: now.Add(3 * time.Second)},
	}
	stateSets := [][]store.State{
		nil,
		{store.StateFailed},
		{store.StateUnknown, store.StatePending},
		{store.StateNeedsAttention, store.StateSucceeded, store.StateCanceled, store.StateRunning},
		store.States(),
	}
	for _, states := range stateSets {
		for _, oldest := range []bool{false, true} {
			if oldest && states == nil {
				continue
			}
			whole := listAll(t, s, store.ListFilter{States: states, Oldest: oldest, Limit: store.MaxListLimit}, n)
			for _, nf := range narrow {
				f := nf
				f.States, f.Oldest = states, oldest
				var want []string
				for _, j := range whole {
					if f.Matches(j) {
						want = append(want, j.Key)
					}
				}
				for _, limit := range []int{1, 4, 100} {
					f.Limit = limit
					got := keysOf(listPages(t, s, f, n))
					if !slices.Equal(got, want) {
						t.Errorf("List(%+v) = %v; want %v (the unfiltered list's jobs that match, in its order)", f, got, want)
					}
				}
				if states != nil && !oldest {
					ids, more, err := s.MatchIDs(f, store.MaxBulkJobs)
					if err != nil {
						t.Fatalf("MatchIDs(%+v): %v", f, err)
					}
					var gotKeys []string
					for _, id := range ids {
						gotKeys = append(gotKeys, jobs[id].Key)
					}
					slices.Sort(gotKeys)
					w := slices.Sorted(slices.Values(want))
					if more || !slices.Equal(gotKeys, w) {
						t.Errorf("MatchIDs(%+v) = %v (more %v); want %v", f, gotKeys, more, w)
					}
					if len(want) > 2 {
						ids, more, err := s.MatchIDs(f, 2)
						if err != nil || len(ids) != 2 || !more {
							t.Errorf("MatchIDs(%+v, 2) = %d ids, more %v, %v; want 2 of %d and more", f, len(ids), more, err, len(want))
						}
					}
				}
			}
		}
	}
	// The host filter names a target's host: every job is on one of
	// three, none on the status endpoint's.
	sum := 0
	for _, h := range []string{"a.test", "b.test", "a.test:8080", "status.test"} {
		sum += len(listPages(t, s, store.ListFilter{Host: h, Limit: 100}, n))
	}
	if sum != n {
		t.Errorf("jobs listed by host sum to %d; want %d", sum, n)
	}
	if _, _, err := s.MatchIDs(store.ListFilter{Host: "a.test"}, 10); err == nil {
		t.Errorf("MatchIDs without states = nil error; want one")
	}
}

func testListSort(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	n := len(filterJobs(t, s))
	due := []store.State{store.StateUnknown, store.StatePending}
	ended := []store.State{store.StateFailed, store.StateSucceeded, store.StateRunning}
	for _, c := range []struct {
		sorted, like store.ListFilter
	}{
		{store.ListFilter{States: due, Sort: store.ListSortNextRun}, store.ListFilter{States: due, Oldest: true}},
		{store.ListFilter{States: ended, Sort: store.ListSortUpdated}, store.ListFilter{States: ended}},
		{store.ListFilter{States: ended, Sort: store.ListSortUpdated, Host: "b.test"}, store.ListFilter{States: ended, Host: "b.test"}},
	} {
		for _, limit := range []int{1, 5, 100} {
			c.sorted.Limit, c.like.Limit = limit, limit
			got, want := keysOf(listPages(t, s, c.sorted, n)), keysOf(listPages(t, s, c.like, n))
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("List(%+v) = %v; want %v", c.sorted, got, want)
			}
		}
	}
	// Next run: earliest first within each state; updated: latest first.
	for _, j := range [][]*store.Job{listPages(t, s, store.ListFilter{States: due, Sort: store.ListSortNextRun, Limit: 3}, n)} {
		for i := 1; i < len(j); i++ {
			if j[i-1].State == j[i].State && j[i-1].NextRunAt.After(j[i].NextRunAt) {
				t.Errorf("sort next_run: %s (%v) before %s (%v)", j[i-1].Key, j[i-1].NextRunAt, j[i].Key, j[i].NextRunAt)
			}
		}
	}
	for _, f := range []store.ListFilter{
		{Sort: store.ListSortNextRun},
		{Sort: store.ListSortUpdated},
		{States: []store.State{store.StateFailed}, Sort: store.ListSortNextRun},
		{States: []store.State{store.StatePending}, Sort: store.ListSortUpdated},
		{States: due, Sort: store.ListSortNextRun, Oldest: true},
		{States: due, Sort: "bogus"},
	} {
		if p, err := s.List(f); err == nil {
			t.Errorf("List(%+v) = %d jobs; want an error", f, len(p.Jobs))
		}
	}
}

func testManualMany(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	var failed []*store.Job
	for i := range 5 {
		failed = append(failed, driveTo(t, s, fmt.Sprintf("mm-failed-%d", i), store.StateFailed, now.Add(time.Duration(i)*time.Second)))
	}
	pending := driveTo(t, s, "mm-pending", store.StatePending, now.Add(10*time.Second))
	later := now.Add(time.Hour)
	ids := []string{failed[0].ID, pending.ID, failed[1].ID, "0190aaaa-0000-7000-8000-000000000000", failed[2].ID, "not-an-id", failed[0].ID}
	errs, err := s.ManualMany(ctx, ids, store.RetryJob(later, "bulk", "all of them"))
	if err != nil || len(errs) != len(ids) {
		t.Fatalf("ManualMany = %d errors, %v; want %d", len(errs), err, len(ids))
	}
	for i, id := range ids {
		e := errs[i]
		switch {
		case i == 1 || i == 6:
			if !errors.Is(e, store.ErrIllegalTransition) {
				t.Errorf("ManualMany: job %d (%s) error %v; want an illegal transition", i, id, e)
			}
		case i == 3 || i == 5:
			if !errors.Is(e, store.ErrNotFound) {
				t.Errorf("ManualMany: job %d (%s) error %v; want not found", i, id, e)
			}
		case e != nil:
			t.Errorf("ManualMany: job %d (%s) error %v; want nil", i, id, e)
		}
	}
	for i, f := range failed {
		j := get(t, s, f.ID)
		if i < 3 {
			if j.State != store.StatePending || !j.NextRunAt.Equal(later) {
				t.Errorf("retried job %s is %s due %v; want pending due %v", j.Key, j.State, j.NextRunAt, later)
			}
			wantManualEvent(t, j, store.StateFailed, store.StatePending, "bulk", "all of them", later)
			if n := len(j.History) - len(f.History); n != 1 {
				t.Errorf("retried job %s has %d new events; want 1 (a job named twice changes once)", j.Key, n)
			}
		} else {
			wantUnchanged(t, s, f, "a job ManualMany was not given")
		}
	}
	wantUnchanged(t, s, pending, "a pending job ManualMany refused")

	fn, err := store.ResolveJob(store.StateSucceeded, later, "bulk", "checked")
	if err != nil {
		t.Fatal(err)
	}
	errs, err = s.ManualMany(ctx, []string{failed[3].ID}, fn)
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], store.ErrIllegalTransition) {
		t.Errorf("ManualMany(resolve a failed job) = %v, %v; want one illegal transition", errs, err)
	}
	wantUnchanged(t, s, failed[3], "a failed job resolve refused")

	over := make([]string, store.MaxBulkBatch+1)
	for i := range over {
		over[i] = failed[4].ID
	}
	if _, err := s.ManualMany(ctx, over, store.RetryJob(later, "bulk", "")); err == nil {
		t.Errorf("ManualMany(%d ids) = nil error; want the batch refused", len(over))
	}
	wantUnchanged(t, s, failed[4], "a job in a refused batch")
	if counts := stats(t, s); counts[store.StatePending] != 4 || counts[store.StateFailed] != 2 {
		t.Errorf("Stats after ManualMany = %v; want 4 pending, 2 failed", counts)
	}
}

// ListScanBound lists, over ListScan+500 pending jobs of one host and
// one job of another, the other host's jobs (with and without a state
// filter), following Next, and checks that the pages find exactly that
// job, every page short of it ending with a Next. It returns how many
// pages each walk took: 2 for a backend that passes over the jobs
// (ListScan), 1 for one whose query skips them. It enqueues over 20,000
// jobs, so backends run it once, not in Run.
func ListScanBound(t *testing.T, s Store) (pages []int) {
	now := T0()
	const n = store.ListScan + 500
	// Ids and next runs grow with i: the other host's job, first, is the
	// last one a newest-first walk reaches.
	if _, err := s.EnqueueManyFunc(ctx, n+1, func(i int) (*store.Job, error) {
		j := NewJob(fmt.Sprintf("scan-%05d", i), now.Add(time.Duration(i)*time.Millisecond))
		j.Request.URL = "http://a.test/x"
		if i == 0 {
			j.Request.URL = "http://b.test/x"
		}
		return j, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, states := range [][]store.State{nil, {store.StatePending}} {
		f := store.ListFilter{States: states, Host: "b.test", Limit: 10}
		var found []string
		n := 0
		for {
			p, err := s.List(f)
			if err != nil {
				t.Fatalf("List(%+v): %v", f, err)
			}
			n++
			found = append(found, keysOf(p.Jobs)...)
			if len(found) == 0 && p.Next == "" {
				t.Errorf("List(%v, host b.test) page %d: no jobs and no next page; want the job of b.test", states, n)
			}
			if p.Next == "" || n > 3 {
				break
			}
			f.Cursor = p.Next
		}
		if !slices.Equal(found, []string{"scan-00000"}) {
			t.Errorf("List(%v, host b.test) found %v in %d pages; want scan-00000", states, found, n)
		}
		pages = append(pages, n)
	}
	return pages
}
