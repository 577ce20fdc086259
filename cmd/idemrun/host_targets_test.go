package main

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
)

// The targets of issue 20, with `idemrun run` as a process and the
// requests counted at the fake target.

// startTarget starts a fake target that the test closes.
func startTarget(t *testing.T, f faketarget.Faults) *faketarget.Server {
	t.Helper()
	tg, err := faketarget.Start(faketarget.Config{Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg
}

// enqueueTo enqueues n creates to tg's payments endpoint with its status
// endpoint, keys prefix-0 to prefix-(n-1); extra is more JSON fields of
// each job (`"attempt_timeout":"1s"`).
func (e *env) enqueueTo(tg string, statusTemplate string, prefix string, n int, extra string) {
	e.t.Helper()
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"url":%q,"status_url":%q,"key":"%s-%d","data":"{\"amount\":%d}"%s}`, tg+"/payments", statusTemplate, prefix, i, i+1, extra)
	}
	if r := e.runStdin([]byte(strings.Join(lines, "\n")+"\n"), "enqueue", "--from", "-"); r.code != 0 {
		e.t.Fatalf("enqueue: %s", r)
	}
}

// wantAllSucceeded checks that n jobs succeeded and none is otherwise.
func (e *env) wantAllSucceeded(n int64) {
	e.t.Helper()
	if st := e.statsOf(); st["succeeded"] != n || st["failed"]+st["needs_attention"]+st["pending"]+st["unknown"] != 0 {
		e.t.Errorf("jobs by state %v; want all %d succeeded", st, n)
	}
}

// The 50/s target: with --rate 40/s every job succeeds, at most 2% of
// the requests are answered 429 and no second sees more than 48; with
// no policy, back-pressure alone keeps 429s to at most 20%.
func TestHostTargetRateLimited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		rate          string
		most429       float64
		mostPerSecond int
	}{
		{"rate 40/s", "40/s", 0.02, 48},
		{"no policy", "", 0.20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tg := startTarget(t, faketarget.Faults{RateLimit: 50, RetryAfter: "1"})
			e.enqueueTo(tg.URL(), tg.StatusTemplate(), "rl", 400, "")
			if tc.rate != "" {
				e.ok("host", "set", store.HostOf(tg.URL()), "--rate", tc.rate)
			}
			start := time.Now()
			e.okProc("run", "--workers", "16", "--until-idle", "--log-level", "warn")
			took := time.Since(start)
			c := tg.Requests()
			share := float64(c.Faults.RateLimited429) / float64(c.Posts)
			peak := tg.MaxPostsPerSecond()
			t.Logf("%s: %d requests, %d answered 429 (%.1f%%), at most %d in one second; %d created; %s",
				tc.name, c.Posts, c.Faults.RateLimited429, 100*share, peak, tg.TotalCreates(), took.Round(10*time.Millisecond))
			e.wantAllSucceeded(400)
			if n := tg.TotalCreates(); n != 400 || len(tg.Duplicates()) != 0 {
				t.Errorf("%d creates at the target, duplicates %v; want 400, none", n, tg.Duplicates())
			}
			if share > tc.most429 {
				t.Errorf("%.1f%% of requests answered 429, want at most %.0f%%", 100*share, 100*tc.most429)
			}
			if tc.mostPerSecond > 0 && peak > tc.mostPerSecond {
				t.Errorf("%d requests in one second, want at most %d", peak, tc.mostPerSecond)
			}
		})
	}
}

// hangingHost accepts connections and never answers; it returns its URL.
func hangingHost(t *testing.T) string {
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
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// healthyTime starts a runner on e and returns how long the healthy
// target took to create n payments, failing the test past limit.
func healthyTime(t *testing.T, e *env, healthy *faketarget.Server, n int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	p := e.startRunner("--workers", "16")
	defer p.stop(syscall.SIGTERM)
	for healthy.TotalCreates() < n {
		if time.Since(start) > limit {
			t.Fatalf("%d of %d healthy jobs created within %s", healthy.TotalCreates(), n, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// A host that never answers (100 jobs) beside a healthy one with 20 ms
// latency (300 jobs): the healthy jobs finish within 5 s of their time
// alone.
func TestHostTargetHangingHost(t *testing.T) {
	t.Parallel()
	alone := newEnv(t)
	tgAlone := startTarget(t, faketarget.Faults{Latency: 20 * time.Millisecond})
	alone.enqueueTo(tgAlone.URL(), tgAlone.StatusTemplate(), "h", 300, `,"attempt_timeout":"2s"`)
	tAlone := healthyTime(t, alone, tgAlone, 300, 30*time.Second)

	e := newEnv(t)
	tg := startTarget(t, faketarget.Faults{Latency: 20 * time.Millisecond})
	sick := hangingHost(t)
	// Interleaved, so the sick host's jobs are due among the healthy ones.
	for i := range 4 {
		if i == 0 {
			e.enqueueTo(sick, sick+"/payments/by-key/{key}", "s", 100, `,"attempt_timeout":"2s"`)
		}
		e.enqueueTo(tg.URL(), tg.StatusTemplate(), fmt.Sprint("h", i), 100, `,"attempt_timeout":"2s"`)
	}
	tMixed := healthyTime(t, e, tg, 300, 40*time.Second)
	t.Logf("300 healthy jobs: %s alone, %s beside a host that never answers", tAlone.Round(10*time.Millisecond), tMixed.Round(10*time.Millisecond))
	if tMixed > tAlone+5*time.Second {
		t.Errorf("the healthy jobs took %s beside the host that never answers, %s alone; want within 5s of it", tMixed, tAlone)
	}
}

// host pause: no request reaches the host until host resume, and none
// of its jobs spends an attempt meanwhile; the pause outlasts the runner
// that was running when it was set.
func TestHostTargetPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, faketarget.Faults{})
	host := store.HostOf(tg.URL())
	e.enqueueTo(tg.URL(), tg.StatusTemplate(), "p", 20, "")
	e.ok("host", "pause", host, "--note", "maintenance")
	p := e.startRunner("--workers", "4")
	time.Sleep(1500 * time.Millisecond)
	p.stop(syscall.SIGTERM)
	p = e.startRunner("--workers", "4")
	defer p.stop(syscall.SIGTERM)
	time.Sleep(1500 * time.Millisecond)
	if c := tg.Requests(); c.Posts != 0 || c.StatusQueries != 0 {
		t.Fatalf("a paused host received %d creates and %d status queries", c.Posts, c.StatusQueries)
	}
	for _, j := range jsonArray(t, e.ok("list", "--json")) {
		if j["state"] != "pending" || j["attempts"] != 0.0 {
			t.Fatalf("a job of the paused host: %v; want pending after no attempt", j)
		}
	}
	e.ok("host", "resume", host) // through the running runner's admin socket
	for deadline := time.Now().Add(15 * time.Second); tg.TotalCreates() < 20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 jobs created within 15 s of the resume", tg.TotalCreates())
		}
	}
	if c := tg.Requests(); c.Posts != 20 {
		t.Errorf("%d creates sent for 20 jobs, want one each", c.Posts)
	}
}

// A status endpoint that cannot see creates in progress, creates landing
// 3 s after they arrived, attempt timeout 1 s, host set --settle 6s: no
// duplicates. Every create times out, so the host's breaker opens; its
// status endpoint still answers, and the status queries the open breaker
// lets through settle the unknown jobs. With a window shorter than the
// lag, the same target gets duplicates: it lags as the test needs.
func TestHostTargetLaggingStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		settle string
		dups   bool
	}{{"6s", false}, {"10ms", true}} {
		t.Run("settle "+tc.settle, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tg := startTarget(t, faketarget.Faults{SlowCommit: 1, SlowCommitDelay: 3 * time.Second, HideInProgress: true})
			e.enqueueTo(tg.URL(), tg.StatusTemplate(), "lag", 60, `,"attempt_timeout":"1s"`)
			e.ok("host", "set", store.HostOf(tg.URL()), "--settle", tc.settle)
			start := time.Now()
			// A short quiet period: the first status query comes right
			// after the timeout, inside the lag.
			p := e.startRunner("--workers", "16", "--quiet-period", "100ms")
			stopped := false
			defer func() {
				if !stopped {
					p.stop(syscall.SIGTERM)
				}
			}()
			for deadline := start.Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				st := e.statsOf()
				if st["pending"]+st["running"]+st["unknown"] == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("jobs by state %v after 40 s; want all ended", st)
				}
			}
			took := time.Since(start)
			// A create sent last may still be on its way to its commit
			// when its job ends on the status of the first: stop the
			// runner and let the target settle before counting.
			p.stop(syscall.SIGTERM)
			stopped = true
			if !tg.Settle(10 * time.Second) {
				t.Fatalf("the target's create handlers did not settle within 10 s")
			}
			c := tg.Requests()
			t.Logf("settle %s: 60 jobs ended in %s: %d creates sent, %d payments, %d status queries (%d not found), %d keys created twice",
				tc.settle, took.Round(10*time.Millisecond), c.Posts, tg.TotalCreates(), c.StatusQueries, c.StatusNotFound, len(tg.Duplicates()))
			if !tc.dups {
				if d := tg.Duplicates(); len(d) != 0 {
					t.Errorf("%d jobs created twice with a settle window of 6s: %v", len(d), d)
				}
				if n := tg.TotalCreates(); n != 60 {
					t.Errorf("%d payments for 60 jobs", n)
				}
				e.wantAllSucceeded(60)
			} else if len(tg.Duplicates()) == 0 {
				t.Errorf("no job created twice with a settle window of %s: the target does not lag as the test needs", tc.settle)
			}
		})
	}
}
