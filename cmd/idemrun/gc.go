package main

import (
	"os"
	"runtime/debug"
)

// tuneGC sets the collector for a long-running runner unless the user
// chose: GOGC=400 (the runner's live heap is small, ~15 MiB, and the
// default 100 spends a fifth of the throughput collecting it) with a soft
// memory limit of 1 GiB so the heap cannot grow unbounded. GOGC and
// GOMEMLIMIT in the environment win.
func tuneGC(getenv func(string) string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}
