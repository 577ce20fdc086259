package faketarget

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Over RateLimit in one second a POST is answered 429 with Retry-After
// and creates nothing; MaxPostsPerSecond counts every POST that arrived.
func TestRateLimit(t *testing.T) {
	s := startServer(t, Config{Faults: Faults{RateLimit: 3, RetryAfter: "1"}})
	c := newClient(t, testTimeout)
	codes := map[int]int{}
	for i := range 5 {
		r := post(c, s.URL(), fmt.Sprintf("k%d", i), `{"amount":1}`)
		if r.err != nil {
			t.Fatal(r.err)
		}
		codes[r.code]++
		if r.code == http.StatusTooManyRequests && r.header.Get("Retry-After") != "1" {
			t.Errorf("429 without Retry-After: 1: %v", r.header)
		}
	}
	if codes[http.StatusCreated] != 3 || codes[http.StatusTooManyRequests] != 2 {
		t.Errorf("answers %v; want 3 created and 2 answered 429", codes)
	}
	if n := s.TotalCreates(); n != 3 {
		t.Errorf("%d creates, want 3", n)
	}
	if got := s.Requests(); got.Posts != 5 || got.Faults.RateLimited429 != 2 {
		t.Errorf("counters %+v; want 5 posts, 2 rate limited", got)
	}
	if n := s.MaxPostsPerSecond(); n != 5 {
		t.Errorf("MaxPostsPerSecond = %d, want 5", n)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := post(c, s.URL(), "later", `{"amount":1}`); r.code != http.StatusCreated {
		t.Errorf("a POST a second later: %d, want 201", r.code)
	}
}

// With HideInProgress the status endpoint does not see a slow create
// until it committed.
func TestHideInProgress(t *testing.T) {
	s := startServer(t, Config{Faults: Faults{SlowCommit: 1, SlowCommitDelay: 500 * time.Millisecond, HideInProgress: true}})
	c := newClient(t, 100*time.Millisecond)
	_ = post(c, s.URL(), "slow", `{"amount":1}`) // the client gives up; the create goes on
	if err := s.WaitInFlight(testContext(t), "slow", 1); err != nil {
		t.Fatal(err)
	}
	if r := get(newClient(t, testTimeout), statusURL(s, "slow")); r.code != http.StatusNotFound {
		t.Errorf("status of a create in progress: %d %s, want 404", r.code, r.body)
	}
	if err := s.WaitCreates(testContext(t), "slow", 1); err != nil {
		t.Fatal(err)
	}
	if r := get(newClient(t, testTimeout), statusURL(s, "slow")); r.code != http.StatusOK {
		t.Errorf("status once committed: %d %s, want 200", r.code, r.body)
	}
}
