package faketarget

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestEachFaultAlone(t *testing.T) {
	tests := []struct {
		name           string
		faults         Faults
		wantErr        bool // a transport error instead of an answer
		wantCode       int
		wantRetryAfter string
		wantCreates    int
		wantBodies     int
		fault          func(FaultCounts) int
	}{
		{"LoseResponse", Faults{LoseResponse: 1}, true, 0, "", 1, 1,
			func(f FaultCounts) int { return f.LoseResponse }},
		{"Busy503", Faults{Busy503: 1}, false, http.StatusServiceUnavailable, "1", 0, 1,
			func(f FaultCounts) int { return f.Busy503 }},
		{"Busy503 RetryAfter", Faults{Busy503: 1, RetryAfter: "7"}, false, http.StatusServiceUnavailable, "7", 0, 1,
			func(f FaultCounts) int { return f.Busy503 }},
		{"TooMany429", Faults{TooMany429: 1}, false, http.StatusTooManyRequests, "1", 0, 1,
			func(f FaultCounts) int { return f.TooMany429 }},
		{"CommitThen500", Faults{CommitThen500: 1}, false, http.StatusInternalServerError, "", 1, 1,
			func(f FaultCounts) int { return f.CommitThen500 }},
		{"CommitThen502", Faults{CommitThen502: 1}, false, http.StatusBadGateway, "", 1, 1,
			func(f FaultCounts) int { return f.CommitThen502 }},
		{"CommitThen504", Faults{CommitThen504: 1}, false, http.StatusGatewayTimeout, "", 1, 1,
			func(f FaultCounts) int { return f.CommitThen504 }},
		{"SlowCommit", Faults{SlowCommit: 1, SlowCommitDelay: 20 * time.Millisecond}, false, http.StatusCreated, "", 1, 1,
			func(f FaultCounts) int { return f.SlowCommit }},
		{"DropBeforeHandling", Faults{DropBeforeHandling: 1}, true, 0, "", 0, 0,
			func(f FaultCounts) int { return f.DropBeforeHandling }},
		{"probability above 1", Faults{CommitThen500: 3}, false, http.StatusInternalServerError, "", 1, 1,
			func(f FaultCounts) int { return f.CommitThen500 }},
		{"probability 0 or below", Faults{Busy503: 0, LoseResponse: -1}, false, http.StatusCreated, "", 1, 1,
			func(f FaultCounts) int { return 1 + f.Busy503 + f.LoseResponse }}, // 1 when neither fired
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, Config{Faults: tt.faults})
			r := post(newClient(t, testTimeout), s.URL(), "k", `{"amount":5}`)
			if gotErr := r.err != nil; gotErr != tt.wantErr {
				t.Fatalf("transport error: got %v (code %d), want error %v", r.err, r.code, tt.wantErr)
			}
			if r.code != tt.wantCode {
				t.Errorf("code: got %d %q, want %d", r.code, r.body, tt.wantCode)
			}
			if r.err == nil {
				if got := r.header.Get("Retry-After"); got != tt.wantRetryAfter {
					t.Errorf("Retry-After: got %q, want %q", got, tt.wantRetryAfter)
				}
			}
			if got := s.Creates("k"); got != tt.wantCreates {
				t.Errorf("Creates: got %d, want %d", got, tt.wantCreates)
			}
			if got := len(s.BodiesByKey("k")); got != tt.wantBodies {
				t.Errorf("recorded bodies: got %d, want %d", got, tt.wantBodies)
			}
			c := s.Requests()
			if got := tt.fault(c.Faults); got != 1 {
				t.Errorf("fault count: got %d, want 1 (%+v)", got, c.Faults)
			}
			if c.Posts != 1 {
				t.Errorf("Posts: got %d, want 1", c.Posts)
			}
			want2xx := 0
			if tt.wantCode == http.StatusCreated {
				want2xx = 1
			}
			if c.Answered2xx != want2xx {
				t.Errorf("Answered2xx: got %d, want %d", c.Answered2xx, want2xx)
			}
		})
	}
}

// TestFaultsAfterCommitOnReplays checks that with Dedup on a lost or 5xx
// answer after the commit point also hits replays, and that the replays
// never create.
func TestFaultsAfterCommitOnReplays(t *testing.T) {
	s := startServer(t, Config{Dedup: true, Faults: Faults{CommitThen502: 1}})
	c := newClient(t, testTimeout)
	for i := range 3 {
		if r := post(c, s.URL(), "k", `{}`); r.code != http.StatusBadGateway {
			t.Fatalf("attempt %d: got %d, want 502", i, r.code)
		}
	}
	s.SetFaults(Faults{LoseResponse: 1})
	if r := post(c, s.URL(), "k", `{}`); r.err == nil {
		t.Fatalf("LoseResponse on a replay: got %d, want a transport error", r.code)
	}
	if got := s.Creates("k"); got != 1 {
		t.Errorf("Creates: got %d, want 1", got)
	}
	if got := s.Requests(); got.Replayed != 3 || got.Faults.CommitThen502 != 3 || got.Faults.LoseResponse != 1 {
		t.Errorf("counters: got replayed=%d 502=%d lose=%d, want 3 3 1", got.Replayed, got.Faults.CommitThen502, got.Faults.LoseResponse)
	}
}

func TestLatency(t *testing.T) {
	const latency = 50 * time.Millisecond
	s := startServer(t, Config{Faults: Faults{Latency: latency}})
	c := newClient(t, testTimeout)
	for _, tc := range []struct {
		name string
		send func() result
		want int
	}{
		{"POST", func() result { return post(c, s.URL(), "k", `{}`) }, http.StatusCreated},
		{"status", func() result { return get(c, statusURL(s, "k")) }, http.StatusOK},
		{"stats", func() result { return get(c, s.URL()+"/stats") }, http.StatusOK},
	} {
		start := time.Now()
		r := tc.send()
		if elapsed := time.Since(start); elapsed < latency || r.code != tc.want {
			t.Errorf("%s: got %d after %v, want %d after at least %v", tc.name, r.code, elapsed, tc.want, latency)
		}
	}
}

// TestFlakyStatus sends status queries one by one: each must be a 503 with
// Retry-After or a hang, which the test cuts off once the server has counted
// it, and the server must count exactly what the client saw.
func TestFlakyStatus(t *testing.T) {
	s := startServer(t, Config{Seed: 3, Faults: Faults{FlakyStatus: 1, StatusHang: time.Hour, RetryAfter: "2"}})
	if r := post(newClient(t, testTimeout), s.URL(), "k", `{}`); r.code != http.StatusCreated {
		t.Fatalf("POST: got %d, want 201", r.code)
	}
	c := newClient(t, testTimeout)
	ctx := testContext(t)
	const n = 16
	got503, gotHangs := 0, 0
	for i := range n {
		reqCtx, cancel := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, statusURL(s, "k"), nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan result, 1)
		go func() { done <- do(c, req) }()
		if err := s.waitFor(ctx, func() bool {
			f := s.counters.Faults
			return f.FlakyStatus503+f.FlakyStatusHang == i+1
		}); err != nil {
			t.Fatal(err)
		}
		if s.Requests().Faults.FlakyStatusHang > gotHangs {
			cancel() // the server is hanging: give up like a client timeout would
		}
		r := <-done
		cancel()
		switch {
		case r.err != nil:
			gotHangs++
		case r.code == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "2":
			got503++
		default:
			t.Errorf("status query: got %d %q (Retry-After %q), want 503 with Retry-After 2 or a hang",
				r.code, r.body, r.header.Get("Retry-After"))
		}
	}
	fc := s.Requests().Faults
	if fc.FlakyStatus503 != got503 || fc.FlakyStatusHang != gotHangs {
		t.Errorf("fault counts: got 503=%d hang=%d, want %d %d as seen by the client", fc.FlakyStatus503, fc.FlakyStatusHang, got503, gotHangs)
	}
	if got503 == 0 || gotHangs == 0 {
		t.Errorf("got %d 503s and %d hangs in %d queries, want both kinds", got503, gotHangs, n)
	}
	if got := s.Requests().StatusQueries; got != n {
		t.Errorf("StatusQueries: got %d, want %d", got, n)
	}
}

// TestFlakyStatusHangThenAnswers checks that a hang ends with the true
// answer for a client that waits it out.
func TestFlakyStatusHangThenAnswers(t *testing.T) {
	const hang = 30 * time.Millisecond
	s := startServer(t, Config{Faults: Faults{FlakyStatus: 1, StatusHang: hang}})
	c := newClient(t, testTimeout)
	if r := post(c, s.URL(), "k", `{}`); r.code != http.StatusCreated {
		t.Fatalf("POST: got %d, want 201", r.code)
	}
	answered := 0
	for i := 0; i < 40 && answered == 0; i++ {
		start := time.Now()
		r := get(c, statusURL(s, "k"))
		switch {
		case r.code == http.StatusServiceUnavailable:
		case r.code == http.StatusOK && time.Since(start) >= hang && decodeStatus(t, r.body).Status == "succeeded":
			answered++
		default:
			t.Fatalf("status query: got %d %q after %v, want 503 or 200 after %v", r.code, r.body, time.Since(start), hang)
		}
	}
	if answered == 0 {
		t.Errorf("got no answer after a hang in 40 queries, want one")
	}
}

// TestSeededFaultsRepeat checks that one seed gives the same faults for the
// same sequence of requests, and another seed different ones.
func TestSeededFaultsRepeat(t *testing.T) {
	run := func(seed uint64) []int {
		s := startServer(t, Config{Seed: seed, Faults: Faults{Busy503: 0.5}})
		c := newClient(t, testTimeout)
		var codes []int
		for i := range 24 {
			codes = append(codes, post(c, s.URL(), "k"+string(rune('a'+i)), `{}`).code)
		}
		return codes
	}
	a, b, other := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Errorf("same seed: got %v then %v, want equal", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 42 and 43: got %v for both, want different", a)
	}
	if !slices.Contains(a, http.StatusCreated) || !slices.Contains(a, http.StatusServiceUnavailable) {
		t.Errorf("codes at p=0.5: got %v, want both 201 and 503", a)
	}
}
