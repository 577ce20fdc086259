package api

import "testing"

// A write wakes the waiters of its own job and those that do not know
// their job's id yet, not the waiters of other jobs.
func TestChangesWakeTheirJobOnly(t *testing.T) {
	var w changes
	w.waiters.Add(3)
	mine, other, any := w.watch("job-a"), w.watch("job-b"), w.watch("")
	w.wake("job-a")
	for name, ch := range map[string]<-chan struct{}{"job-a's waiter": mine, "a waiter of any job": any} {
		select {
		case <-ch:
		default:
			t.Errorf("%s was not woken by a write of job-a", name)
		}
	}
	select {
	case <-other:
		t.Error("job-b's waiter was woken by a write of job-a")
	default:
	}
}
