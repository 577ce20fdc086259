// Package parallel spreads independent CPU work over the cores.
package parallel

import (
	"runtime"
	"sync"
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
