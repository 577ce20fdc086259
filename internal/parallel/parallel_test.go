package parallel

import (
	"sync/atomic"
	"testing"
)

func TestForCallsEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, MinItems - 1, MinItems, 10007} {
		seen := make([]atomic.Int32, n)
		For(n, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d called %d times, want 1", n, i, c)
			}
		}
	}
}

func TestStreamCallsEachIndexOnceAndWaitCoversItsChunk(t *testing.T) {
	for _, c := range []struct{ n, size int }{{0, 4}, {1, 4}, {5, 1}, {255, 256}, {256, 256}, {1000, 7}, {10007, 256}} {
		seen := make([]atomic.Int32, c.n)
		s := Stream(c.n, c.size, func(i int) { seen[i].Add(1) })
		covered := 0
		for k := range s.Chunks() {
			s.Wait(k)
			lo, hi := s.Chunk(k)
			if lo != covered || hi <= lo || hi-lo > c.size {
				t.Fatalf("n=%d size=%d: chunk %d is [%d,%d), want it to start at %d with 1..%d indexes", c.n, c.size, k, lo, hi, covered, c.size)
			}
			for i := lo; i < hi; i++ {
				if got := seen[i].Load(); got != 1 {
					t.Fatalf("n=%d size=%d: after Wait(%d) index %d was called %d times, want 1", c.n, c.size, k, i, got)
				}
			}
			covered = hi
		}
		s.Done()
		if covered != c.n {
			t.Fatalf("n=%d size=%d: chunks cover [0,%d), want [0,%d)", c.n, c.size, covered, c.n)
		}
		for i := range seen {
			if got := seen[i].Load(); got != 1 {
				t.Fatalf("n=%d size=%d: index %d called %d times, want 1", c.n, c.size, i, got)
			}
		}
	}
}

func TestStreamDoneWaitsForEveryCall(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	s := Stream(600, 100, func(i int) {
		if i == 599 {
			<-release
		}
		calls.Add(1)
	})
	s.Wait(0)
	close(release)
	s.Done()
	if got := calls.Load(); got != 600 {
		t.Fatalf("Done returned after %d calls, want 600", got)
	}
}

func TestStreamMakesASingleChunkBeforeReturning(t *testing.T) {
	calls := 0 // no atomics: a single chunk runs in this goroutine
	s := Stream(100, 256, func(int) { calls++ })
	if calls != 100 {
		t.Fatalf("Stream of one chunk returned after %d calls, want 100", calls)
	}
	s.Wait(0)
	s.Done()
}
