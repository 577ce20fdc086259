package runner_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// limitedTarget accepts at most perSec creates in any one second and
// answers the others 429 with Retry-After: 1, counting at the server.
type limitedTarget struct {
	srv    *httptest.Server
	perSec int

	mu       sync.Mutex
	accepted []time.Time // accept times within the last second
	arrivals []time.Time
	n429     int
	created  map[string]int
}

func newLimitedTarget(t *testing.T, perSec int) *limitedTarget {
	t.Helper()
	lt := &limitedTarget{perSec: perSec, created: map[string]int{}}
	lt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		now := time.Now()
		lt.mu.Lock()
		lt.arrivals = append(lt.arrivals, now)
		i := 0
		for i < len(lt.accepted) && now.Sub(lt.accepted[i]) >= time.Second {
			i++
		}
		lt.accepted = lt.accepted[i:]
		if len(lt.accepted) >= lt.perSec {
			lt.n429++
			lt.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		lt.accepted = append(lt.accepted, now)
		lt.created[r.Header.Get("Idempotency-Key")]++
		lt.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ok"}`)
	}))
	t.Cleanup(lt.srv.Close)
	return lt
}

// figures returns the requests received, those answered 429, and the
// most requests that arrived in any one-second window.
func (lt *limitedTarget) figures() (total, n429, maxPerSec int) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	j := 0
	for i := range lt.arrivals {
		for lt.arrivals[i].Sub(lt.arrivals[j]) >= time.Second {
			j++
		}
		maxPerSec = max(maxPerSec, i-j+1)
	}
	return len(lt.arrivals), lt.n429, maxPerSec
}

// defaultJob is a job with the api's defaults: 5 attempts, a 15-minute
// deadline, a 10 s attempt timeout.
func defaultJob(url string, mods ...func(j *store.Job)) *store.Job {
	return newJob(url, append([]func(j *store.Job){func(j *store.Job) {
		j.MaxAttempts = 5
		j.DeadlineAfter = 15 * time.Minute
		j.Deadline = j.CreatedAt.Add(j.DeadlineAfter)
		j.AttemptTimeout = 10 * time.Second
		j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "Idempotency-Key", Value: j.Key})
	}}, mods...)...)
}

// scenarioConfig is the runner's defaults with 16 workers.
func scenarioConfig(t *testing.T) runner.Config {
	t.Helper()
	client := runner.NewHTTPClient(16)
	t.Cleanup(client.CloseIdleConnections)
	return runner.Config{Workers: 16, Doer: client, ShutdownGrace: 200 * time.Millisecond}
}

func countStates(t *testing.T, db *bolt.DB) map[store.State]int64 {
	t.Helper()
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// setPolicy stores a host policy.
func setPolicy(t *testing.T, db *bolt.DB, host string, fn func(p *store.HostPolicy)) {
	t.Helper()
	if _, err := db.UpdateHostPolicy(context.Background(), host, func(p *store.HostPolicy, _ bool) error { fn(p); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestTrafficRateLimitedTarget is the first scenario: a target
// allowing 50 creates per second, 400 jobs, 16 workers; with a rate
// policy, and with none (back-pressure alone).
func TestTrafficRateLimitedTarget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rate          float64
		burst         int
		most429       float64 // share of requests
		mostPerSecond int
	}{
		{"no policy", 0, 0, 0.20, 0},
		{"rate 50/s", 50, 0, 0.05, 0},
		// The target: the default burst keeps every second
		// within 1.2 times the rate.
		{"rate 40/s", 40, 0, 0.02, 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLimitedTarget(t, 50)
			db := openStore(t)
			if tc.rate > 0 {
				setPolicy(t, db, store.HostOf(lt.srv.URL), func(p *store.HostPolicy) { p.Rate, p.Burst = tc.rate, tc.burst })
			}
			for range 400 {
				enqueue(t, db, defaultJob(lt.srv.URL))
			}
			start := time.Now()
			runIdleWithin(t, db, scenarioConfig(t), 30*time.Second)
			total, n429, peak := lt.figures()
			st := countStates(t, db)
			t.Logf("%s: %d requests, %d answered 429 (%.1f%%), at most %d in a second; %d succeeded, %d failed; %s",
				tc.name, total, n429, 100*float64(n429)/float64(total), peak, st[store.StateSucceeded], st[store.StateFailed], time.Since(start).Round(10*time.Millisecond))
			if st[store.StateSucceeded] != 400 {
				t.Errorf("%d of 400 jobs succeeded, want all", st[store.StateSucceeded])
			}
			if share := float64(n429) / float64(total); share > tc.most429 {
				t.Errorf("%.1f%% of requests answered 429, want at most %.0f%%", 100*share, 100*tc.most429)
			}
			if tc.mostPerSecond > 0 && peak > tc.mostPerSecond {
				t.Errorf("%d requests in one second, want at most %d", peak, tc.mostPerSecond)
			}
		})
	}
}

// hangingListener accepts connections and never answers.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// healthyJobsTime runs a runner until healthy jobs have succeeded, or
// limit passed, and returns how long that took.
func healthyJobsTime(t *testing.T, db *bolt.DB, cfg runner.Config, healthy int64, limit time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var done atomic.Int64
	start := time.Now()
	var took atomic.Int64
	cfg.OnWrite = func(j *store.Job) {
		if j.State == store.StateSucceeded && done.Add(1) == healthy {
			took.Store(int64(time.Since(start)))
			cancel()
		}
	}
	if err := runner.New(db, cfg).Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took.Load() == 0 {
		t.Fatalf("%d of %d healthy jobs succeeded within %s", done.Load(), healthy, limit)
	}
	return time.Duration(took.Load())
}

// healthyAlone starts a healthy host (answers in 20 ms) and returns it
// with the time 300 jobs to it take alone.
func healthyAlone(t *testing.T) (*target, time.Duration) {
	t.Helper()
	healthy := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		time.Sleep(20 * time.Millisecond) // the target's own work
		w.WriteHeader(http.StatusCreated)
	})
	alone := openStore(t)
	for range 300 {
		enqueue(t, alone, defaultJob(healthy.URL()))
	}
	return healthy, healthyJobsTime(t, alone, scenarioConfig(t), 300, 15*time.Second)
}

// TestTrafficHangingHost is the second scenario: a host that
// accepts connections and never answers beside a healthy one.
func TestTrafficHangingHost(t *testing.T) {
	healthy, tAlone := healthyAlone(t)

	sick := hangingListener(t)
	db := openStore(t)
	short := func(j *store.Job) { j.AttemptTimeout = 2 * time.Second }
	for i := range 400 {
		if i%4 == 0 {
			enqueue(t, db, defaultJob(sick, short))
		} else {
			enqueue(t, db, defaultJob(healthy.URL(), short))
		}
	}
	tMixed := healthyJobsTime(t, db, scenarioConfig(t), 300, 20*time.Second)
	t.Logf("300 healthy jobs: %s alone, %s beside a host that never answers", tAlone.Round(10*time.Millisecond), tMixed.Round(10*time.Millisecond))
	if tMixed > tAlone+3*time.Second {
		t.Errorf("the healthy jobs took %s beside the host that never answers, %s alone; want within 3s of it", tMixed, tAlone)
	}
}

// TestTrafficHangingHostFirstInQueue: the jobs of a host that accepts
// connections and never answers are due first, those of a healthy host
// after them, with the default 10 s attempt timeout. The host that never
// answered is new to the runner, so it holds only its share of the
// workers, though it is the only host at the start; the claims pass over
// its jobs to the healthy ones, whose jobs are not held up by it.
func TestTrafficHangingHostFirstInQueue(t *testing.T) {
	healthy, tAlone := healthyAlone(t)

	sick := hangingListener(t)
	db := openStore(t)
	for range 100 {
		enqueue(t, db, defaultJob(sick))
	}
	for range 300 {
		enqueue(t, db, defaultJob(healthy.URL()))
	}
	// Past the 10 s attempt timeout, so a runner that gave the workers
	// to the sick host shows by how much.
	tMixed := healthyJobsTime(t, db, scenarioConfig(t), 300, 25*time.Second)
	bound := 2*tAlone + time.Second
	t.Logf("300 healthy jobs: %s alone, %s behind 100 jobs to a host that never answers (bound %s)",
		tAlone.Round(10*time.Millisecond), tMixed.Round(10*time.Millisecond), bound.Round(10*time.Millisecond))
	if tMixed > bound {
		t.Errorf("the healthy jobs took %s behind the host that never answers, %s alone; want at most %s", tMixed, tAlone, bound)
	}
}

// laggingTarget creates an operation 5 s after its request arrived (the
// answer comes then too); its status endpoint finds only committed ones.
type laggingTarget struct {
	srv     *httptest.Server
	mu      sync.Mutex
	created map[string]int
}

func newLaggingTarget(t *testing.T, lag time.Duration) *laggingTarget {
	t.Helper()
	lt := &laggingTarget{created: map[string]int{}}
	stop := make(chan struct{})
	lt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			key := strings.TrimPrefix(r.URL.Path, "/status/")
			lt.mu.Lock()
			n := lt.created[key]
			lt.mu.Unlock()
			if n == 0 {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"succeeded"}`)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		select {
		case <-time.After(lag):
		case <-stop:
			return
		}
		lt.mu.Lock()
		lt.created[key]++
		lt.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(lt.srv.Close)
	t.Cleanup(func() { close(stop) })
	return lt
}

func (lt *laggingTarget) duplicates() (created, dups int) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for _, n := range lt.created {
		created++
		if n > 1 {
			dups++
		}
	}
	return created, dups
}

// TestTrafficLaggingStatus is the third scenario: a status
// endpoint that cannot see a create until 5 s after it arrived, with a 2 s
// attempt timeout: without a settle window, "not found" comes too early
// and jobs are created twice; with a window of 6 s, none is.
func TestTrafficLaggingStatus(t *testing.T) {
	for _, settle := range []time.Duration{0, 6 * time.Second} {
		t.Run(fmt.Sprintf("settle %s", settle), func(t *testing.T) {
			t.Parallel()
			lt := newLaggingTarget(t, 5*time.Second)
			db := openStore(t)
			if settle > 0 {
				setPolicy(t, db, store.HostOf(lt.srv.URL), func(p *store.HostPolicy) { p.Settle = settle })
			}
			for range 60 {
				enqueue(t, db, defaultJob(lt.srv.URL, func(j *store.Job) {
					j.AttemptTimeout = 2 * time.Second
					j.StatusURL = lt.srv.URL + "/status/{key}"
				}))
			}
			cfg := scenarioConfig(t)
			if settle == 0 {
				cfg.Settle = -1 // not even the default window
			}
			// Every create times out here by design: isolation would slow
			// the test down, and settling is what it is about.
			cfg.HostShare, cfg.BreakerFailures = 1, 1000
			runIdleWithin(t, db, cfg, 25*time.Second)
			created, dups := lt.duplicates()
			t.Logf("settle %s: %d of 60 jobs created, %d of them twice or more", settle, created, dups)
			switch {
			case settle > 0 && dups != 0:
				t.Errorf("%d jobs created twice with a settle window of %s, want none", dups, settle)
			case settle == 0 && dups == 0:
				t.Errorf("no job created twice without a settle window: the target does not lag as this test needs")
			}
			if st := countStates(t, db); st[store.StateSucceeded] != 60 {
				t.Errorf("%d of 60 jobs succeeded", st[store.StateSucceeded])
			}
		})
	}
}

// A paused host gets no request and its jobs spend nothing; a resume,
// read live by the running runner, lets them go. A job whose deadline
// passed while it waited ends failed, never sent.
func TestTrafficPause(t *testing.T) {
	tg := statusTarget(t, http.StatusCreated)
	db := openStore(t)
	host := store.HostOf(tg.URL())
	setPolicy(t, db, host, func(p *store.HostPolicy) { p.Paused, p.Note = true, "maintenance" })
	jobs := enqueueN(t, db, tg.URL(), 5)
	late := newJob(tg.URL(), func(j *store.Job) { j.Deadline = j.CreatedAt.Add(500 * time.Millisecond) })
	enqueue(t, db, late)
	cfg := testConfig(t)
	cfg.PolicyReload = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { cfg.UntilIdle = true; done <- runner.New(db, cfg).Run(ctx) }()
	time.Sleep(time.Second)
	if n := tg.N(); n != 0 {
		t.Fatalf("a paused host received %d requests", n)
	}
	for _, j := range append(jobs, late) {
		if got := getJob(t, db, j.ID); got.State != store.StatePending || got.Attempts != 0 {
			t.Fatalf("job of a paused host: %s after %d attempts, want pending after none", got.State, got.Attempts)
		}
	}
	setPolicy(t, db, host, func(p *store.HostPolicy) { p.Paused = false })
	if err := <-done; err != nil || ctx.Err() != nil {
		t.Fatalf("Run after resume = %v (%v), want idle", err, ctx.Err())
	}
	wantSucceededOnce(t, tg, db, jobs)
	got := getJob(t, db, late.ID)
	wantState(t, got, store.StateFailed)
	wantContains(t, "reason", got.Reason, "deadline passed")
	if n := tg.N(); n != int64(len(jobs)) {
		t.Errorf("target saw %d requests, want %d: the late job must not be sent", n, len(jobs))
	}
}

// A 429 with Retry-After holds the host back until then and does not
// spend the job's budget, up to MaxAttempts free sends.
func TestTrafficPushBackIsFree(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, n int64, _ received) {
		if n <= 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	db := openStore(t)
	j := newJob(tg.URL(), func(j *store.Job) { j.MaxAttempts = 2 })
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.Workers = 1
	runIdle(t, db, cfg)
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	if got.Attempts != 4 {
		t.Errorf("%d attempts, want 4 (2 free 429s, 1 counted, then the 201 within a budget of 2)", got.Attempts)
	}
	var last time.Time
	for i, e := range attempts(got) {
		if i > 0 && e.Start.Sub(last) < 900*time.Millisecond {
			t.Errorf("attempt %d came %s after the one answered Retry-After: 1", e.N, e.Start.Sub(last))
		}
		last = e.Start
	}
}

// TestSettleWindowConfirmsEarly: the settle window holds back replays,
// not status queries. A create that took effect but whose answer was a
// 500 is found by the first status query after the quiet period, under
// the default 30 s window, and is never sent twice.
func TestSettleWindowConfirmsEarly(t *testing.T) {
	var mu sync.Mutex
	created := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet {
			if created[strings.TrimPrefix(r.URL.Path, "/status/")] == 0 {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"succeeded"}`)
			return
		}
		created[r.Header.Get("Idempotency-Key")]++
		w.WriteHeader(http.StatusInternalServerError) // done, but the answer says nothing
	}))
	t.Cleanup(srv.Close)
	db := openStore(t)
	for range 10 {
		enqueue(t, db, defaultJob(srv.URL, func(j *store.Job) { j.StatusURL = srv.URL + "/status/{key}" }))
	}
	start := time.Now()
	runIdleWithin(t, db, scenarioConfig(t), 20*time.Second)
	took := time.Since(start)
	if st := countStates(t, db); st[store.StateSucceeded] != 10 {
		t.Errorf("%d of 10 jobs succeeded, want all (states %v)", st[store.StateSucceeded], st)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, n := range created {
		if n != 1 {
			t.Errorf("key %s created %d times, want once", key, n)
		}
	}
	if took >= runner.DefaultSettle/2 {
		t.Errorf("confirmed after %s, want well inside the %s settle window (first status query after the quiet period)", took, runner.DefaultSettle)
	}
}
