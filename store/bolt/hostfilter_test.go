package bolt_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// hostJobs enqueues n pending jobs to http://host/x, due one microsecond
// apart from now on, and returns their ids.
func hostJobs(t *testing.T, db *bolt.DB, host string, n int, now time.Time) []string {
	t.Helper()
	var ids []string
	for i := range n {
		j := storetest.NewJob(fmt.Sprintf("%s-%d", host, i), now.Add(time.Duration(i)*time.Microsecond))
		j.Request.URL = "http://" + host + "/x"
		if _, err := db.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

func claimedHosts(cs []store.Claim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, store.ClaimHost(c.Job))
	}
	return out
}

// ClaimDue passes over the jobs of skipped hosts and of hosts Admit
// refuses, which stay due; Admit is asked once for a refused host and
// once for each job claimed.
func TestClaimDueHostFilter(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("entries without hosts %v", old), func(t *testing.T) {
			db, _ := newDB(t, nil)
			now := storetest.T0()
			hostJobs(t, db, "paused.example", 5, now)
			hostJobs(t, db, "full.example:8080", 5, now.Add(time.Millisecond))
			hostJobs(t, db, "ok.example", 5, now.Add(2*time.Millisecond))
			if old {
				if err := bolt.SetIndexValue(db, func(string) []byte { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var asked []string
			admit := func(h string) bool {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, h)
				return h != "full.example:8080"
			}
			cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Second), Limit: 3,
				SkipHosts: []string{"paused.example"}, Admit: admit})
			if err != nil {
				t.Fatal(err)
			}
			if got := claimedHosts(cs); !slices.Equal(got, []string{"ok.example", "ok.example", "ok.example"}) {
				t.Errorf("claimed %v, want 3 jobs of ok.example", got)
			}
			if want := []string{"full.example:8080", "ok.example", "ok.example", "ok.example"}; !slices.Equal(asked, want) {
				t.Errorf("Admit asked about %v, want %v", asked, want)
			}
			st, _ := db.Stats()
			if st[store.StatePending] != 12 {
				t.Errorf("%d jobs pending, want 12", st[store.StatePending])
			}
			// Unfiltered, the oldest come first again.
			cs, err = db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Second), Limit: 1})
			if err != nil || len(cs) != 1 || store.ClaimHost(cs[0].Job) != "paused.example" {
				t.Errorf("unfiltered claim = %v, %v; want a paused.example job", claimedHosts(cs), err)
			}
		})
	}
}

// A host named by the index entry decides without the record: an entry
// naming a skipped host is passed over whatever its record says.
func TestClaimDueSkipsByIndexEntry(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	ids := hostJobs(t, db, "a.example", 2, now)
	if err := bolt.SetIndexValue(db, func(id string) []byte {
		if id == ids[0] {
			return bolt.HostValue("skipped.example")
		}
		return bolt.HostValue("a.example")
	}); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Second), Limit: 2, SkipHosts: []string{"skipped.example"}})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != ids[1] {
		t.Fatalf("ClaimDue = %d claims, %v; want only the second job", len(cs), err)
	}
	rep, err := db.Check()
	if err != nil || rep.OK() {
		t.Errorf("Check of an entry naming the wrong host = %v, %v; want a problem", rep.Problems, err)
	}
	// Repair, so the cleanup's check passes.
	if err := bolt.SetIndexValue(db, func(string) []byte { return bolt.HostValue("a.example") }); err != nil {
		t.Fatal(err)
	}
}

// An unknown job's claims go to its status URL's host, and its entry
// keeps naming it after a claim.
func TestClaimDueUnknownByStatusHost(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("u", now)
	j.StatusURL = "https://status.example/ops/{key}"
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatal(len(cs), err)
	}
	if _, _, err := db.FinishClaim(ctx, cs[0], func(j *store.Job) error {
		j.State, j.NextRunAt, j.UpdatedAt = store.StateUnknown, now, now
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	for _, skip := range []string{"status.example", "127.0.0.1:1"} {
		cs, err = db.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now.Add(time.Second), Limit: 1, SkipHosts: []string{skip},
			Prepare: func(j *store.Job) { j.NextRunAt = now.Add(2 * time.Second) }})
		if err != nil {
			t.Fatal(err)
		}
		if want := skip != "status.example"; (len(cs) == 1) != want {
			t.Errorf("skipping %s: %d claims, want claimed %v", skip, len(cs), want)
		}
	}
	// Claimed once, due again later under the same host.
	cs, _ = db.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now.Add(3 * time.Second), Limit: 1, SkipHosts: []string{"status.example"}})
	if len(cs) != 0 {
		t.Errorf("a claimed unknown job's entry no longer names its status host")
	}
}

// A chained claim passes over skipped and refused hosts as ClaimDue does.
func TestFinishClaimNextHostFilter(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	hostJobs(t, db, "first.example", 1, now)
	hostJobs(t, db, "paused.example", 3, now.Add(time.Millisecond))
	hostJobs(t, db, "full.example", 3, now.Add(2*time.Millisecond))
	hostJobs(t, db, "ok.example", 1, now.Add(3*time.Millisecond))
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatal(len(cs), err)
	}
	asked := 0
	_, nc, err := db.FinishClaim(ctx, cs[0], func(j *store.Job) error {
		j.State, j.UpdatedAt = store.StateSucceeded, now
		return nil
	}, &store.NextClaim{Now: now.Add(time.Second), SkipHosts: []string{"paused.example"}, Admit: func(h string) bool {
		asked++
		return h == "ok.example"
	}})
	if err != nil || nc == nil {
		t.Fatalf("FinishClaim = %v, %v; want a next claim", nc, err)
	}
	if h := store.ClaimHost(nc.Job); h != "ok.example" || asked != 2 {
		t.Errorf("next claim went to %s after %d Admit calls; want ok.example after 2", h, asked)
	}
}

// However many due jobs of passed-over hosts come first (a paused host's,
// one Admit refuses), a claim finds the other hosts' jobs behind them,
// oldest first, and leaves the others due; Check finds the index by host
// in step with the index after every change.
func TestClaimDueBehindPassedHosts(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	const ahead = 10000
	jobs := make([]*store.Job, 0, ahead+30)
	for i := range ahead {
		j := storetest.NewJob(fmt.Sprintf("p%d", i), now.Add(time.Duration(i)*time.Microsecond))
		j.Request.URL = "http://paused.example/x"
		if i%2 == 1 {
			j.Request.URL = "http://full.example/x"
		}
		jobs = append(jobs, j)
	}
	var want []string
	for i := range 30 {
		j := storetest.NewJob(fmt.Sprintf("o%d", i), now.Add(time.Duration(ahead+i)*time.Microsecond))
		j.Request.URL = fmt.Sprintf("http://other%d.example/x", i%3)
		jobs = append(jobs, j)
		want = append(want, j.ID)
	}
	if _, err := db.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	admit := func(h string) bool { return h != "full.example" }
	req := store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Second), Limit: 20, SkipHosts: []string{"paused.example"}, Admit: admit}
	var got []string
	for len(got) < 30 {
		cs, err := db.ClaimDue(ctx, req)
		if err != nil || len(cs) == 0 {
			t.Fatalf("after %d of the 30 jobs behind %d passed over: %d claims, %v", len(got), ahead, len(cs), err)
		}
		for _, c := range cs {
			got = append(got, c.Job.ID)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("claimed %d jobs out of their due order, or others", len(got))
	}
	st, err := db.Stats()
	if err != nil || st[store.StatePending] != ahead || st[store.StateRunning] != 30 {
		t.Errorf("Stats = %v, %v; want the %d passed over pending, 30 running", st, err, ahead)
	}
	if rep, err := db.Check(); err != nil || !rep.OK() {
		t.Errorf("Check = %+v, %v", rep.Problems, err)
	}
	// Resumed, the paused host's jobs are claimed oldest first.
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Second), Limit: 3, Admit: admit})
	if err != nil || len(cs) != 3 || cs[0].Job.ID != jobs[0].ID || cs[1].Job.ID != jobs[2].ID {
		t.Errorf("after the resume: %v, %v; want the paused host's first jobs", claimedHosts(cs), err)
	}
}

// A file of schema 1, without the index by host, gets it when opened for
// writing; its entries then match the index.
func TestHostDueBuiltOnUpgrade(t *testing.T) {
	db, path := newDB(t, nil)
	now := storetest.T0()
	hostJobs(t, db, "a.example", 5, now)
	hostJobs(t, db, "b.example", 5, now)
	if err := bolt.MakeSchema1(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, nil)
	if rep, err := db.Check(); err != nil || !rep.OK() {
		t.Errorf("Check after the upgrade = %+v, %v", rep.Problems, err)
	}
	if n, err := bolt.HostDueLen(db); err != nil || n != 10 {
		t.Errorf("the index by host holds %d entries (%v), want 10", n, err)
	}
}
