package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// admitter is a ClaimRequest.Admit that takes the hosts in take, each at
// most its count of times (a token bucket), and records what it was
// asked and what it promised.
type admitter struct {
	take     map[string]int
	asked    []string
	promised []string
}

func (a *admitter) admit(host string) bool {
	a.asked = append(a.asked, host)
	if a.take[host] <= 0 {
		return false
	}
	a.take[host]--
	a.promised = append(a.promised, host)
	return true
}

// claimHosts returns the ClaimHost of each claim's job, in claim order.
func claimHosts(cs []store.Claim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, store.ClaimHost(c.Job))
	}
	return out
}

// testClaimSkipHosts: ClaimDue passes over the due jobs of SkipHosts,
// by ClaimHost (the target's host for a pending job, the status URL's
// for an unknown one), and claims other hosts' jobs even when the
// skipped host's are older and far more numerous than Limit; the
// skipped jobs stay pending, unclaimed and unchanged.
func testClaimSkipHosts(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	hostsOf(t, s)
	now := T0()
	const paused, ok = "paused.example.com", "ok.example.com:8080"
	var skipped []*store.Job
	for i := range 60 {
		j := jobTo(fmt.Sprintf("paused-%02d", i), hostURL(paused), now.Add(-time.Hour))
		j.NextRunAt = now.Add(-time.Hour + time.Duration(i)*time.Second)
		skipped = append(skipped, enqueue(t, s, j))
	}
	var oks []string
	for i := range 3 {
		j := jobTo(fmt.Sprintf("ok-%d", i), hostURL(ok), now.Add(-time.Minute))
		j.NextRunAt = now.Add(-time.Minute + time.Duration(i)*time.Second)
		oks = append(oks, enqueue(t, s, j).ID)
	}
	claimKeys := func(limit int, skip ...string) []string {
		t.Helper()
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: limit, SkipHosts: skip})
		if err != nil {
			t.Fatalf("ClaimDue(skip %v): %v", skip, err)
		}
		return claimIDs(cs)
	}
	if got := claimKeys(2, paused); !slices.Equal(got, oks[:2]) {
		t.Errorf("ClaimDue(limit 2, skip %s) claimed %v; want the two oldest of %s %v", paused, got, ok, oks[:2])
	}
	if got := claimKeys(10, "other.example.com", paused); !slices.Equal(got, oks[2:]) {
		t.Errorf("ClaimDue(limit 10, skip %s) claimed %v; want the last of %s %v", paused, got, ok, oks[2:])
	}
	if got := claimKeys(10, paused); len(got) != 0 {
		t.Errorf("ClaimDue(skip %s) with only its jobs due claimed %v; want none", paused, got)
	}
	for _, j := range skipped {
		wantUnchanged(t, s, j, "ClaimDue skipping its host")
	}
	// Without the skip they are claimed as ever, oldest first.
	if got := claimKeys(1); len(got) != 1 || got[0] != skipped[0].ID {
		t.Errorf("ClaimDue with no skip claimed %v; want %s", got, skipped[0].ID)
	}

	// An unknown job's host is its status URL's; without a status URL,
	// its target's.
	s = open(t)
	later := now.Add(time.Hour)
	withStatus := jobTo("u-status", hostURL("api.example.com"), later)
	withStatus.StatusURL = "http://Status.example.com:9000/s/{key}"
	enqueue(t, s, withStatus)
	c := claim(t, s, store.StatePending, withStatus.ID, later)
	finish(t, s, withStatus.ID, c.Fence, store.StateUnknown, later)
	bare := jobTo("u-bare", hostURL("bare.example.com"), later)
	enqueue(t, s, bare)
	c = claim(t, s, store.StatePending, bare.ID, later)
	finish(t, s, bare.ID, c.Fence, store.StateUnknown, later)
	claimUnknown := func(skip ...string) []string {
		t.Helper()
		cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: later, Limit: 10, SkipHosts: skip})
		if err != nil {
			t.Fatalf("ClaimDue(unknown, skip %v): %v", skip, err)
		}
		return claimHosts(cs)
	}
	if got := claimUnknown("status.example.com:9000", "bare.example.com"); len(got) != 0 {
		t.Errorf("ClaimDue(unknown) skipping the status host and the bare job's target claimed %v; want none", got)
	}
	if got := claimUnknown("api.example.com"); !slices.Equal(got, []string{"status.example.com:9000", "bare.example.com"}) {
		t.Errorf("ClaimDue(unknown) skipping the target host claimed jobs of %v; want the status host's, then the bare job's target's", got)
	}
}

// testClaimAdmit: ClaimDue asks Admit about each due job it would claim,
// with its ClaimHost, never about a skipped host; a job Admit refuses
// stays due and unclaimed, and the claim goes on past it to other hosts'
// jobs; every true answer is a job claimed.
func testClaimAdmit(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	hostsOf(t, s)
	now := T0()
	var refused []*store.Job
	for i := range 3 {
		j := jobTo(fmt.Sprintf("full-%02d", i), hostURL("full.example.com"), now)
		j.NextRunAt = now.Add(-time.Hour + time.Duration(i)*time.Second)
		refused = append(refused, enqueue(t, s, j))
	}
	for i := range 5 {
		j := jobTo(fmt.Sprintf("skip-%d", i), hostURL("skip.example.com"), now)
		j.NextRunAt = now.Add(-30 * time.Minute)
		enqueue(t, s, j)
	}
	var two []string
	for i := range 4 {
		j := jobTo(fmt.Sprintf("two-%d", i), hostURL("two.example.com"), now)
		j.NextRunAt = now.Add(-time.Minute + time.Duration(i)*time.Second)
		id := enqueue(t, s, j).ID
		if i < 2 {
			two = append(two, id)
		}
	}
	a := &admitter{take: map[string]int{"two.example.com": 2}}
	cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 3, SkipHosts: []string{"skip.example.com"}, Admit: a.admit})
	if err != nil {
		t.Fatalf("ClaimDue with Admit: %v", err)
	}
	if got := claimIDs(cs); !slices.Equal(got, two) {
		t.Errorf("ClaimDue(limit 3) with Admit taking two jobs of two.example.com claimed %v; want its two oldest %v", got, two)
	}
	if !slices.Equal(a.promised, claimHosts(cs)) {
		t.Errorf("Admit promised %v; claims went to %v: every true answer must be a claim", a.promised, claimHosts(cs))
	}
	if slices.Contains(a.asked, "skip.example.com") {
		t.Errorf("Admit was asked about a skipped host: %v", a.asked)
	}
	if !slices.Contains(a.asked, "full.example.com") {
		t.Errorf("Admit was never asked about full.example.com, whose jobs are the oldest due: %v", a.asked)
	}
	for _, j := range refused {
		wantUnchanged(t, s, j, "a claim Admit refused")
	}
	// Refused jobs stay due: asked again, they are claimed, oldest first.
	a = &admitter{take: map[string]int{"full.example.com": 1}}
	cs, err = s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 5, SkipHosts: []string{"skip.example.com"}, Admit: a.admit})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != refused[0].ID {
		t.Errorf("ClaimDue taking one job of full.example.com = %v, %v; want %s", claimIDs(cs), err, refused[0].ID)
	}
	if !slices.Equal(a.promised, claimHosts(cs)) {
		t.Errorf("Admit promised %v; claims went to %v", a.promised, claimHosts(cs))
	}
}

// testFinishNextHosts: FinishClaim's next claim honours SkipHosts and
// Admit as ClaimDue does: it chains the earliest due job of a host not
// skipped and admitted, however many older jobs a skipped host has; a
// job Admit refuses stays due; nothing admitted, nothing chained.
func testFinishNextHosts(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	hostsOf(t, s)
	now := T0()
	r := register(t, s, now.Add(-2*time.Hour), 4*time.Hour)
	const paused = "paused.example.com"

	var held []store.Claim
	for i := range 3 {
		w := enqueue(t, s, jobTo(fmt.Sprintf("w%d", i), hostURL("worker.example.com"), now.Add(-2*time.Hour)))
		held = append(held, claimFor(t, s, store.StatePending, w.ID, r.ID, now.Add(-2*time.Hour)))
	}
	u := jobTo("u", hostURL(paused), now.Add(-50*time.Minute))
	u.StatusURL = "http://status.example.com/s/{key}"
	enqueue(t, s, u)
	cu := claimFor(t, s, store.StatePending, u.ID, r.ID, now.Add(-50*time.Minute))
	if _, err := finishAt(s, u.ID, cu.Fence, moveTo(store.StateUnknown, now.Add(-50*time.Minute))); err != nil {
		t.Fatal(err)
	}
	var skipped []*store.Job
	for i := range 30 {
		j := jobTo(fmt.Sprintf("paused-%02d", i), hostURL(paused), now)
		j.NextRunAt = now.Add(-time.Hour + time.Duration(i)*time.Second)
		skipped = append(skipped, enqueue(t, s, j))
	}
	later := enqueue(t, s, jobTo("later", hostURL("ok.example.com"), now.Add(-time.Minute)))

	finishNext := func(c store.Claim, next *store.NextClaim) *store.Claim {
		t.Helper()
		next.Now, next.Owner = now, r.ID
		next.Unknown = func(j *store.Job) { j.NextRunAt = now.Add(30 * time.Second) } // a status query's lease
		_, nc, err := s.FinishClaim(ctx, c, moveTo(store.StateSucceeded, now), next)
		if err != nil {
			t.Fatalf("FinishClaim(%s): %v", c.Job.Key, err)
		}
		if nc != nil {
			wantClaim(t, s, *nc, r.ID)
		}
		return nc
	}
	// The unknown job's host is its status URL's, not paused: it is
	// chained first, past 30 older jobs of the paused host.
	nc := finishNext(held[0], &store.NextClaim{SkipHosts: []string{paused}})
	if nc == nil || nc.Job.ID != u.ID {
		t.Fatalf("FinishClaim skipping %s chained %v; want the unknown job %s", paused, nc, u.ID)
	}
	// Admit refusing ok.example.com: nothing else is due, nothing chained.
	a := &admitter{take: map[string]int{}}
	if nc := finishNext(held[1], &store.NextClaim{SkipHosts: []string{paused}, Admit: a.admit}); nc != nil {
		t.Fatalf("FinishClaim with Admit refusing every host chained %s", nc.Job.Key)
	}
	if !slices.Contains(a.asked, "ok.example.com") || slices.Contains(a.asked, paused) || len(a.promised) != 0 {
		t.Errorf("Admit asked about %v, promised %v; want ok.example.com asked, %s never", a.asked, a.promised, paused)
	}
	wantUnchanged(t, s, later, "a chained claim Admit refused")
	a = &admitter{take: map[string]int{"ok.example.com": 1}}
	nc = finishNext(held[2], &store.NextClaim{SkipHosts: []string{paused}, Admit: a.admit})
	if nc == nil || nc.Job.ID != later.ID || !slices.Equal(a.promised, []string{"ok.example.com"}) {
		t.Fatalf("FinishClaim with Admit taking ok.example.com chained %v (promised %v); want %s", nc, a.promised, later.ID)
	}
	for _, j := range skipped {
		wantUnchanged(t, s, j, "chained claims skipping its host")
	}
}

// testHostCounts: a backend that counts waiting jobs per host
// (store.HostCounter) counts pending and unknown jobs by ClaimHost, and
// those due at the time asked, host by host in byte order.
func testHostCounts(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	hc, ok := s.(store.HostCounter)
	if !ok {
		t.Skipf("%T does not count jobs per host (store.HostCounter is optional)", s)
	}
	now := T0()
	// Running and ended jobs wait for nothing.
	driveTo(t, s, "done", store.StateSucceeded, now)
	driveTo(t, s, "run", store.StateRunning, now)
	u := jobTo("u", hostURL("a.example.com"), now)
	u.StatusURL = "http://status.example.com/s/{key}"
	enqueue(t, s, u)
	c := claim(t, s, store.StatePending, u.ID, now)
	finish(t, s, u.ID, c.Fence, store.StateUnknown, now)
	for i := range 3 {
		j := jobTo(fmt.Sprintf("a-%d", i), hostURL("a.example.com"), now)
		if i == 2 {
			j.NextRunAt = now.Add(time.Hour)
		}
		enqueue(t, s, j)
	}
	got, err := hc.HostCounts(ctx, now)
	if err != nil {
		t.Fatalf("HostCounts: %v", err)
	}
	want := []store.HostCount{
		{Host: "a.example.com", Pending: 3, Due: 2},
		{Host: "status.example.com", Unknown: 1, Due: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("HostCounts = %+v; want %+v", got, want)
	}
}
