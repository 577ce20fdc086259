//go:build !unix

package bench

import "time"

// cpuTime is 0 where the process's CPU time is not read: the bench then
// reports no CPU per job.
func cpuTime() time.Duration { return 0 }
