package faketarget

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestConcurrentPosts has 200 goroutines post 50 keys, each goroutine one key
// twice, and checks the ground truth.
func TestConcurrentPosts(t *testing.T) {
	const (
		goroutines = 200
		keys       = 50
		perG       = 2
	)
	tests := []struct {
		name        string
		dedup       bool
		faults      Faults
		wantCreates int
		wantDups    int
		allowed     map[int]bool
	}{
		{"dedup", true, Faults{}, keys, 0, map[int]bool{201: true}},
		{"dedup slow commits", true, Faults{SlowCommit: 0.5, SlowCommitDelay: 10 * time.Millisecond}, keys, 0,
			map[int]bool{201: true, 409: true}},
		{"no dedup", false, Faults{}, goroutines * perG, keys, map[int]bool{201: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, Config{Dedup: tt.dedup, Faults: tt.faults, Seed: 1})
			tr := &http.Transport{MaxIdleConnsPerHost: goroutines}
			t.Cleanup(tr.CloseIdleConnections)
			c := &http.Client{Transport: tr, Timeout: testTimeout}

			var mu sync.Mutex
			ids := make(map[string]map[string]bool) // key -> ids answered
			codes := make(map[int]int)
			var wg sync.WaitGroup
			for g := range goroutines {
				key := fmt.Sprintf("key-%02d", g%keys)
				wg.Go(func() {
					for range perG {
						r := post(c, s.URL(), key, fmt.Sprintf(`{"amount":%d}`, g%keys))
						mu.Lock()
						codes[r.code]++
						if r.err != nil {
							codes[-1]++
							if codes[-1] <= 3 {
								t.Logf("POST %s: %v", key, r.err)
							}
						}
						if r.code == http.StatusCreated {
							if ids[key] == nil {
								ids[key] = make(map[string]bool)
							}
							ids[key][decodePayment(t, r.body).ID] = true
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()

			for code, n := range codes {
				if !tt.allowed[code] {
					t.Errorf("answers: got %d x %d, want only %v", n, code, tt.allowed)
				}
			}
			if got := s.TotalCreates(); got != tt.wantCreates {
				t.Errorf("TotalCreates: got %d, want %d", got, tt.wantCreates)
			}
			if got := len(s.Duplicates()); got != tt.wantDups {
				t.Errorf("duplicate keys: got %d, want %d", got, tt.wantDups)
			}
			byKey := s.CreatesByKey()
			if len(byKey) != keys {
				t.Errorf("keys with creates: got %d, want %d", len(byKey), keys)
			}
			for key, n := range byKey {
				if tt.dedup && (n != 1 || len(ids[key]) != 1) {
					t.Errorf("key %s: got %d creates and %d distinct ids answered, want 1 and 1", key, n, len(ids[key]))
				}
				if got := len(s.BodiesByKey(key)); got != perG*goroutines/keys {
					t.Errorf("key %s: got %d recorded bodies, want %d", key, got, perG*goroutines/keys)
				}
			}
			if got := s.Requests().Posts; got != goroutines*perG {
				t.Errorf("Posts: got %d, want %d", got, goroutines*perG)
			}
		})
	}
}

// TestConcurrentFaultsNeverDuplicate hammers a deduplicating target whose
// every fault is on at once; whatever the answers, no key may be created
// twice.
func TestConcurrentFaultsNeverDuplicate(t *testing.T) {
	s := startServer(t, Config{Dedup: true, Seed: 9, Faults: Faults{
		LoseResponse: 0.2, Busy503: 0.1, TooMany429: 0.1, CommitThen500: 0.1, CommitThen502: 0.1,
		CommitThen504: 0.1, SlowCommit: 0.3, SlowCommitDelay: 5 * time.Millisecond, DropBeforeHandling: 0.1,
	}})
	c := newClient(t, testTimeout)
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", g%20)
			for range 4 {
				post(c, s.URL(), key, `{"amount":1}`)
			}
		})
	}
	wg.Wait()
	if d := s.Duplicates(); len(d) != 0 {
		t.Errorf("Duplicates: got %v, want none", d)
	}
	for key, n := range s.CreatesByKey() {
		if n != 1 {
			t.Errorf("key %s: got %d creates, want 1", key, n)
		}
	}
	if got := s.TotalCreates(); got > 20 {
		t.Errorf("TotalCreates: got %d, want at most 20", got)
	}
}

// TestCloseWithWorkInFlight closes a server while slow creates (2s default
// delay) and status hangs are in flight: Close must return well under a
// second, abandon the creates, and leave no goroutine behind.
func TestCloseWithWorkInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := Start(Config{Seed: 5, Faults: Faults{SlowCommit: 1, FlakyStatus: 1, StatusHang: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	tr := &http.Transport{DisableKeepAlives: true}
	c := &http.Client{Transport: tr, Timeout: testTimeout}

	const creates, queries = 10, 6
	createResults := make(chan result, creates)
	queryResults := make(chan result, queries)
	var wg sync.WaitGroup
	for i := range creates {
		wg.Go(func() { createResults <- post(c, s.URL(), fmt.Sprintf("k%d", i), `{}`) })
	}
	for range queries {
		wg.Go(func() { queryResults <- get(c, statusURL(s, "k0")) })
	}
	if err := s.waitFor(ctx, func() bool {
		inFlight := 0
		for _, ks := range s.keys {
			inFlight += len(ks.pending)
		}
		f := s.counters.Faults
		return inFlight == creates && f.FlakyStatus503+f.FlakyStatusHang == queries
	}); err != nil {
		t.Fatalf("waiting for the work to be in flight: %v", err)
	}
	hangs := s.Requests().Faults.FlakyStatusHang

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if elapsed := time.Since(start); elapsed >= time.Second {
		t.Errorf("Close took %v, want under 1s", elapsed)
	}
	wg.Wait()
	close(createResults)
	close(queryResults)
	for r := range createResults {
		if r.err == nil {
			t.Errorf("create cut off by Close: got %d %q, want a transport error", r.code, r.body)
		}
	}
	// A 503 may be cut off too when Close comes before it is written, so
	// only the hangs are sure to fail.
	queryErrs := 0
	for r := range queryResults {
		switch {
		case r.err != nil:
			queryErrs++
		case r.code != http.StatusServiceUnavailable:
			t.Errorf("status query: got %d %q, want 503 or a transport error", r.code, r.body)
		}
	}
	if queryErrs < hangs {
		t.Errorf("status query errors: got %d, want at least the %d hangs", queryErrs, hangs)
	}
	if got := s.TotalCreates(); got != 0 {
		t.Errorf("TotalCreates after Close: got %d, want 0", got)
	}
	if got := s.Requests().Abandoned; got != creates {
		t.Errorf("Abandoned: got %d, want %d", got, creates)
	}
	if got := s.CommitInFlight(); got != 0 {
		t.Errorf("CommitInFlight after Close: got %d, want 0", got)
	}
	if err := s.WaitCreates(ctx, "k0", 1); err != ErrClosed {
		t.Errorf("WaitCreates after Close: got %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	tr.CloseIdleConnections()

	// No channel reports that the runtime has reaped a goroutine, so poll,
	// bounded in time.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(2 * time.Second); after > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: got %d after Close, want at most %d before Start\n%s", after, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestCloseInterruptsLatency closes a server while requests wait out their
// latency; Close must not wait for it.
func TestCloseInterruptsLatency(t *testing.T) {
	s, err := Start(Config{Faults: Faults{Latency: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	c := newClient(t, testTimeout)
	done := make(chan result, 1)
	go func() { done <- post(c, s.URL(), "k", `{}`) }()
	if err := s.waitFor(ctx, func() bool { return s.counters.Posts == 1 }); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed >= time.Second {
		t.Errorf("Close took %v, want under 1s", elapsed)
	}
	if r := <-done; r.err == nil {
		t.Errorf("POST cut by Close: got %d, want a transport error", r.code)
	}
	if got := s.TotalCreates(); got != 0 {
		t.Errorf("TotalCreates: got %d, want 0", got)
	}
}
