package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// socketFDs counts the process's open sockets (Linux).
func socketFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// peakDuring runs fn and returns the largest value sample gave, sampled
// every period while fn ran (what it measures is gone when fn returns).
func peakDuring(period time.Duration, sample func() int64, fn func()) int64 {
	stop := make(chan struct{})
	var peak atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n := sample(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// maxSocketsDuring runs fn and returns the most sockets open while it ran.
func maxSocketsDuring(t *testing.T, fn func()) int {
	return int(peakDuring(2*time.Millisecond, func() int64 { return int64(socketFDs(t)) }, fn))
}

// With --max-conns-per-host -1 the runner has no connection cap (one idle
// connection kept per worker), so its HTTP ceiling must be measured with
// as many connections as workers, not with one.
func TestHTTPCeilingNoConnLimitUsesWorkersConns(t *testing.T) {
	const workers = 16
	base := socketFDs(t)
	for _, conns := range []int{0, -1} {
		peak := maxSocketsDuring(t, func() {
			if _, err := httpCeiling(context.Background(), Config{Workers: workers, MaxConnsPerHost: conns}, 20000); err != nil {
				t.Fatal(err)
			}
		})
		// Each client connection is two sockets in this process (the
		// client's and the in-process target's), plus the listener.
		if got := (peak - base - 1) / 2; got < workers/2 {
			t.Errorf("max-conns-per-host %d: the HTTP ceiling used ~%d connections, the runner would use up to %d", conns, got, workers)
		}
	}
}

// --preload fills "the store": the EnqueueMany figure must be measured on a
// store that holds the preloaded jobs too, like the one-by-one figure and
// the latencies (BENCHMARKS.md reports enqueue_many_jobs_per_s in its
// "1,000,000 end-state jobs" column).
func TestRunPreloadFillsEnqueueManyStore(t *testing.T) {
	dir := t.TempDir()
	manySize := func() int64 {
		var size int64
		m, _ := filepath.Glob(filepath.Join(dir, "*", "bench-many.db"))
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil {
				size = max(size, fi.Size())
			}
		}
		return size
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var err error
	peak := peakDuring(time.Millisecond, manySize, func() {
		_, err = Run(ctx, Config{Jobs: 200, Workers: 4, Producers: 2, Preload: 40000, Dir: dir})
	})
	if err != nil {
		t.Fatal(err)
	}
	// 40,000 stored jobs take well over 4 MiB.
	if p := peak; p < 4<<20 {
		t.Errorf("EnqueueMany ran on a %d-byte store: the %d preloaded jobs are not in it", p, 40000)
	}
}

// An interrupt during the profiled work phase must still stop the CPU
// profile: otherwise the profile is never flushed (--cpuprofile FILE
// --profile-phase work leaves FILE empty) and the process's profiler stays
// on.
func TestRunCanceledWhileWorkingStopsProfile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := writerFunc(func(p []byte) {
		if strings.HasPrefix(string(p), "Enqueue (") {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
	})
	var prof bytes.Buffer
	_, err := Run(ctx, Config{Jobs: 20000, Workers: 8, Producers: 16, Dir: t.TempDir(), Out: out, Profile: &prof, ProfilePhase: "work"})
	if err == nil {
		t.Fatal("the work phase ended before the cancel; the test proves nothing")
	}
	if perr := pprof.StartCPUProfile(io.Discard); perr != nil {
		t.Errorf("Run returned %v with the work phase's CPU profile still running (%v); %d bytes of profile written", err, perr, prof.Len())
	}
	pprof.StopCPUProfile()
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// The bench accepts --jobs up to 10,000,000: its jobs must not expire
// before the runner reaches them. With the 15-minute default deadline a
// job claimed after it is stopped ("deadline passed"), never succeeds, and
// the bench waits for the N-th success for ever.
func TestBenchJobsOutliveTheBench(t *testing.T) {
	_, o := request("http://127.0.0.1:1", 0)
	if o.Deadline < 24*time.Hour {
		t.Errorf("bench jobs have deadline %v (0: the 15-minute default); a --jobs 10000000 run takes longer than that", o.Deadline)
	}
}
