package runner

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// policyStore is a store.Hosts of fixed policies.
type policyStore []store.HostPolicy

func (p policyStore) HostPolicies() ([]store.HostPolicy, error) { return p, nil }
func (policyStore) UpdateHostPolicy(context.Context, string, func(*store.HostPolicy, bool) error) (store.HostPolicy, error) {
	return store.HostPolicy{}, nil
}
func (policyStore) UnsetHostPolicy(context.Context, string) error { return nil }

func testTraffic(now *time.Time, ps ...store.HostPolicy) *traffic {
	cfg := Config{Workers: 8}
	cfg.setDefaults()
	return newTraffic(cfg.trafficConfig(), policyStore(ps), func() time.Time { return *now }, slog.New(slog.DiscardHandler))
}

// A paused host and a host at its concurrency are skipped; admit refuses
// them and takes a slot for the others; release gives it back.
func TestTrafficSkipAndAdmit(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := testTraffic(&now, store.HostPolicy{Host: "paused.example", Paused: true}, store.HostPolicy{Host: "one.example", Concurrency: 1})
	if got := tr.skipHosts(now); !slices.Equal(got, []string{"paused.example"}) {
		t.Fatalf("skip = %v, want the paused host", got)
	}
	if tr.admit("paused.example", false) {
		t.Error("admitted a send to a paused host")
	}
	if !tr.admit("one.example", false) || tr.admit("one.example", false) {
		t.Error("a host of concurrency 1 did not take exactly one send")
	}
	if got := tr.skipHosts(now); !slices.Contains(got, "one.example") {
		t.Errorf("skip = %v, want the full host in it", got)
	}
	tr.release("one.example")
	if got := tr.skipHosts(now); slices.Contains(got, "one.example") || !tr.admit("one.example", false) {
		t.Errorf("after release: skip = %v, want the host taking sends again", got)
	}
	// A new host takes half the workers until it answers.
	for i := range 4 {
		if !tr.admit("new.example", false) {
			t.Fatalf("new host refused its send %d", i+1)
		}
	}
	if tr.admit("new.example", false) {
		t.Error("a new host took more than half the workers before any answer")
	}
}

// A rate policy admits its burst, then one send per token.
func TestTrafficRate(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := testTraffic(&now, store.HostPolicy{Host: "r.example", Rate: 10, Burst: 2})
	tr.skipHosts(now)
	n := 0
	for range 10 {
		if tr.admit("r.example", false) {
			n++
			tr.release("r.example")
		}
	}
	if n != 0 {
		t.Errorf("a rate-limited host new to the runner took %d sends at once, want 0: its bucket starts empty", n)
	}
	now = now.Add(time.Second)
	for range 10 {
		if tr.admit("r.example", false) {
			n++
			tr.release("r.example")
		}
	}
	if n != 2 {
		t.Errorf("a second later it took %d sends, want its burst of 2", n)
	}
	if got := tr.skipHosts(now); !slices.Contains(got, "r.example") {
		t.Errorf("skip = %v, want the host without a token", got)
	}
}

// The promises of jobs that were not claimed after all are given back.
func TestAdmissionsSettle(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := testTraffic(&now, store.HostPolicy{Host: "a.example", Concurrency: 2})
	tr.skipHosts(now) // loads the policies, as every claim does first
	adm := tr.round()
	if !adm.admit("a.example") || !adm.admit("a.example") || adm.admit("a.example") {
		t.Fatal("concurrency 2 did not admit exactly 2")
	}
	j := &store.Job{State: store.StateRunning, Request: store.Request{URL: "http://a.example/x"}}
	hosts := adm.settle(&store.Claim{Job: j}, nil)
	if !slices.Equal(hosts, []string{"a.example", ""}) {
		t.Errorf("settle = %v", hosts)
	}
	if !tr.admit("a.example", false) || tr.admit("a.example", false) {
		t.Error("the unclaimed job's slot was not given back")
	}
}

// Failed sends cap a host at its share of the workers, then open its
// breaker, which skips the host; answers earn the slots back.
func TestTrafficIsolation(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := testTraffic(&now)
	for range 4 {
		if !tr.admit("sick.example", false) {
			t.Fatal("refused")
		}
	}
	for range 4 {
		tr.release("sick.example")
		tr.observe("sick.example", outcomeFailed, 0, 0)
	}
	if tr.state["sick.example"].limit != 2 {
		t.Errorf("limit after failures = %v, want a quarter of 8 workers", tr.state["sick.example"].limit)
	}
	tr.admit("sick.example", false)
	tr.release("sick.example")
	tr.observe("sick.example", outcomeFailed, 0, 0)
	if got := tr.skipHosts(now); !slices.Equal(got, []string{"sick.example"}) || tr.admit("sick.example", false) {
		t.Fatalf("after 5 failures skip = %v, want the breaker open", got)
	}
	now = now.Add(DefaultBreakerCooldown)
	if got := tr.skipHosts(now); len(got) != 0 || !tr.admit("sick.example", false) || tr.admit("sick.example", false) {
		t.Fatalf("after the cool-down skip = %v; want exactly one probe", got)
	}
	tr.release("sick.example")
	tr.observe("sick.example", outcomeAnswered, 201, 0)
	if s := tr.state["sick.example"].breaker.state; s != breakerClosed {
		t.Errorf("after a good probe the breaker is %s", s)
	}
}

// A URL names its host as written only when its authority is exactly it.
func TestURLHostIs(t *testing.T) {
	for _, c := range []struct {
		url, host string
		want      bool
	}{
		{"http://a.example/x", "a.example", true},
		{"http://a.example:8080?q", "a.example:8080", true},
		{"http://a.example", "a.example", true},
		{"http://a.example.evil/x", "a.example", false},
		{"http://evil/?u=http://a.example/", "a.example", false},
		{"http://u@a.example/", "a.example", false},
		{"http://A.example/", "a.example", false},
	} {
		if got := urlHostIs(c.url, c.host); got != c.want {
			t.Errorf("urlHostIs(%q, %q) = %v, want %v", c.url, c.host, got, c.want)
		}
	}
}

// A host that answers some sends and fails others is not down: its
// breaker stays closed however the failures cluster, and an occasional
// push-back holds back only its own job, not the host.
func TestTrafficPartlyFailingHost(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := testTraffic(&now)
	for i := range 40 {
		if !tr.admit("flaky.example", false) {
			t.Fatalf("send %d refused", i)
		}
		tr.release("flaky.example")
		now = now.Add(10 * time.Millisecond)
		switch {
		case i%8 < 2:
			tr.observe("flaky.example", outcomeAnswered, 201, 0)
		case i%8 == 7:
			tr.observe("flaky.example", outcomePushBack, 503, time.Second)
		default:
			tr.observe("flaky.example", outcomeFailed, 0, 0) // five failures in a row, each time
		}
	}
	h := tr.state["flaky.example"]
	if h.breaker.state != breakerClosed {
		t.Errorf("breaker %s for a host that answers; want closed", h.breaker.state)
	}
	if h.throttle.rate != 0 || h.throttle.held(now) {
		t.Errorf("throttle rate %v, held %v after one push-back in eight answers; want none", h.throttle.rate, h.throttle.held(now))
	}
}

// An open breaker holds back sends but lets one status query at a time
// through; an answered query closes the breaker, a failed one leaves it
// open and lets the next query through.
func TestTrafficOpenBreakerLetsOneQueryThrough(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := testTraffic(&now)
	for range 5 {
		tr.admit("slow.example", false)
		tr.release("slow.example")
		tr.observe("slow.example", outcomeFailed, 0, 0)
	}
	if got := tr.skipHosts(now); !slices.Contains(got, "slow.example") {
		t.Fatalf("sends skip %v; want the breaker open", got)
	}
	if got := tr.skipQueries(now); slices.Contains(got, "slow.example") {
		t.Fatalf("queries skip %v; want one query let through", got)
	}
	if !tr.admit("slow.example", true) {
		t.Fatal("status query refused by an open breaker")
	}
	if tr.admit("slow.example", true) || tr.admit("slow.example", false) {
		t.Fatal("a second query, or a send, admitted while the probe is in flight")
	}
	if got := tr.skipQueries(now); !slices.Contains(got, "slow.example") {
		t.Errorf("queries skip %v while a probe is in flight; want the host", got)
	}
	// A query that fails: the breaker stays open, the next query may go.
	tr.release("slow.example")
	tr.queried("slow.example")
	tr.observe("slow.example", outcomeFailed, 0, 0)
	if s := tr.state["slow.example"].breaker.state; s != breakerOpen {
		t.Fatalf("after a failed query the breaker is %s, want open", s)
	}
	if !tr.admit("slow.example", true) {
		t.Fatal("the next query refused after a failed one")
	}
	// An answered query closes the breaker: sends go again.
	tr.release("slow.example")
	tr.queried("slow.example")
	tr.observe("slow.example", outcomeAnswered, 404, 0)
	if s := tr.state["slow.example"].breaker.state; s != breakerClosed {
		t.Fatalf("after an answered query the breaker is %s, want closed", s)
	}
	if !tr.admit("slow.example", false) {
		t.Error("send refused after the breaker closed")
	}
}

// With jobs claimed ahead the runner holds more jobs than it has
// workers; a new or failing host's share is still of the workers.
func TestTrafficSharesAreOfTheSenders(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := Config{Workers: 8}
	cfg.setDefaults()
	tc := cfg.trafficConfig()
	tc.workers = 16 // Workers + ClaimAhead
	tr := newTraffic(tc, policyStore(nil), func() time.Time { return now }, slog.New(slog.DiscardHandler))
	tr.admit("other.example", false)
	n := 0
	for tr.admit("new.example", false) {
		n++
	}
	if n != 4 {
		t.Errorf("a new host beside another took %d slots; want half of 8 workers", n)
	}
	for range n {
		tr.release("new.example")
		tr.observe("new.example", outcomeFailed, 0, 0)
	}
	if got := tr.state["new.example"].limit; got != 2 {
		t.Errorf("a failing host's limit = %v; want a quarter of 8 workers", got)
	}
}
