package api

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/store"
)

// Wait returns the job with this id or key once it is succeeded, failed,
// canceled or needs_attention: the states no runner leaves on its own.
// It reads the job again after each write of a runner embedded through
// NewRunner and of this client's own steering, and otherwise (through a
// runner's admin API, or a store other processes write) polls it with a
// backoff up to a second. Through a runner, requests that get no answer
// (the runner restarting) are asked again; the runner's own refusals end
// the wait. It returns ctx's error when ctx ends first.
func (c *Client) Wait(ctx context.Context, idOrKey string) (*Job, error) {
	c.changes.waiters.Add(1)
	defer c.changes.waiters.Add(-1)
	delay := 20 * time.Millisecond
	id := "" // known after the first read; until then any write wakes it
	for {
		// Watched before the read, so a write between the read and the
		// sleep still wakes it.
		changed := c.changes.watch(id)
		j, err := c.Get(ctx, idOrKey)
		if err == nil {
			id = j.ID
		}
		if err != nil && !(c.rem != nil && unanswered(ctx, err)) {
			return nil, err
		}
		// Through a runner, a request that got no answer (the runner
		// restarting, a dropped connection) is asked again after the
		// delay: the job's fate does not depend on the connection.
		if err == nil && settled(j.State) {
			return j, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
			t.Stop()
		case <-t.C:
			delay = min(2*delay, time.Second)
		}
	}
}

// unanswered reports whether err is a request to a runner's admin API
// that got no answer, rather than the runner's answer or ctx ending.
func unanswered(ctx context.Context, err error) bool {
	var re *RemoteError
	return ctx.Err() == nil && !errors.As(err, &re) && !errors.Is(err, ErrInvalid) && !errors.Is(err, store.ErrNotFound)
}

// settled reports the states Wait returns at.
func settled(s State) bool { return s.Terminal() || s == store.StateNeedsAttention }

// changes wakes the waiters of a client after a write of their job. A
// write with no waiter costs one atomic load.
type changes struct {
	waiters atomic.Int32
	mu      sync.Mutex
	byJob   map[string]chan struct{} // closed by the next wake of that job; "" is any job
}

// watch returns a channel closed by the next write of job id (of any job
// when id is "").
func (w *changes) watch(id string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byJob == nil {
		w.byJob = map[string]chan struct{}{}
	}
	ch, ok := w.byJob[id]
	if !ok {
		ch = make(chan struct{})
		w.byJob[id] = ch
	}
	return ch
}

// wake closes the channels of the watchers of job id and of any job.
func (w *changes) wake(id string) {
	if w.waiters.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range []string{id, ""} {
		if ch, ok := w.byJob[k]; ok {
			close(ch)
			delete(w.byJob, k)
		}
	}
}
