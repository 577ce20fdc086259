// Package parallel spreads independent CPU work over the cores.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// MinItems is the smallest n that For spreads over the cores; below it
// the goroutines would cost more than they save.
const MinItems = 256

// For calls fn(i) exactly once for every i in [0, n), spread over
// GOMAXPROCS goroutines when n is at least MinItems, and returns when all
// calls have returned. Calls for different i may run at once.
func For(n int, fn func(i int)) {
	parts := 1
	if n >= MinItems {
		parts = runtime.GOMAXPROCS(0)
	}
	if parts <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += parts {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// Stream calls fn(i) exactly once for every i in [0, n), in chunks of
// size consecutive indexes handed out in increasing order to GOMAXPROCS
// goroutines, and returns at once. A consumer waits for the chunks in
// order with Wait, so it can use the first chunks while later ones are
// still being made. A single chunk is made in the caller's goroutine
// before Stream returns, as For does with few items. Every Stream must be
// ended with Done, which waits for all calls to return.
func Stream(n, size int, fn func(i int)) *Streamed {
	if size < 1 {
		size = 1
	}
	s := &Streamed{n: n, size: size, ready: make([]chan struct{}, (n+size-1)/size)}
	for k := range s.ready {
		s.ready[k] = make(chan struct{})
	}
	if len(s.ready) == 1 {
		for i := range n {
			fn(i)
		}
		close(s.ready[0])
		return s
	}
	workers := min(runtime.GOMAXPROCS(0), len(s.ready))
	s.wg.Add(workers)
	for range workers {
		go func() {
			defer s.wg.Done()
			for {
				k := int(s.next.Add(1) - 1)
				if k >= len(s.ready) {
					return
				}
				lo, hi := s.Chunk(k)
				for i := lo; i < hi; i++ {
					fn(i)
				}
				close(s.ready[k])
			}
		}()
	}
	return s
}

// Streamed is a Stream in progress.
type Streamed struct {
	n, size int
	ready   []chan struct{}
	next    atomic.Int64
	wg      sync.WaitGroup
}

// Chunks is the number of chunks.
func (s *Streamed) Chunks() int { return len(s.ready) }

// Chunk returns chunk k's indexes, [lo, hi).
func (s *Streamed) Chunk(k int) (lo, hi int) {
	return k * s.size, min((k+1)*s.size, s.n)
}

// Wait returns once fn has returned for every index of chunk k.
func (s *Streamed) Wait(k int) { <-s.ready[k] }

// Done returns once every call has returned.
func (s *Streamed) Done() { s.wg.Wait() }
