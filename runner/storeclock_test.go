package runner_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// sharedStore is a *bolt.DB that behaves as a database shared by many
// machines: it keeps its own clock (store.Clock) and announces enqueues
// made elsewhere (store.Wakeups).
type sharedStore struct {
	*bolt.DB
	clock   func() time.Time
	wakeups chan struct{}
}

func (s sharedStore) Now() time.Time { return s.clock() }

func (s sharedStore) Wakeups(ctx context.Context) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.wakeups:
				select {
				case out <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// A runner over a store that keeps its own clock schedules by that clock,
// not the machine's: a job due in 30 minutes of the machine's time is
// due now on a database an hour ahead, and one due in 30 minutes of the
// database's time is not sent.
func TestRunnerUsesTheStoresClock(t *testing.T) {
	db := openStore(t)
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	st := sharedStore{DB: db, clock: ahead, wakeups: make(chan struct{})}
	tg := statusTarget(t, http.StatusCreated)
	due := newJob(tg.URL(), at(time.Now().Add(30*time.Minute)))
	due.Deadline = ahead().Add(time.Hour)
	later := newJob(tg.URL(), at(ahead().Add(30*time.Minute)))
	enqueue(t, db, due, later)

	cfg := testConfig(t)
	j := runUntil(t, st, cfg, func(j *store.Job) bool { return j.ID == due.ID && j.State == store.StateSucceeded })
	if j.ID != due.ID {
		t.Fatalf("stopped on %s", j.ID)
	}
	if got := getJob(t, db, later.ID); got.State != store.StatePending {
		t.Errorf("the job due in 30 minutes of the store's clock is %s, want pending", got.State)
	}
	if n := tg.N(); n != 1 {
		t.Errorf("target got %d requests, want 1", n)
	}
	if got := getJob(t, db, due.ID); got.UpdatedAt.Before(time.Now().Add(50 * time.Minute)) {
		t.Errorf("the outcome was written at %s, not at the store's time", got.UpdatedAt)
	}
}

// An announcement from the store wakes a runner that would otherwise
// sleep its whole poll interval.
func TestRunnerWakesOnStoreWakeups(t *testing.T) {
	db := openStore(t)
	st := sharedStore{DB: db, clock: time.Now, wakeups: make(chan struct{}, 1)}
	tg := statusTarget(t, http.StatusCreated)
	cfg := testConfig(t)
	cfg.PollInterval = time.Hour
	j := newJob(tg.URL())
	started := make(chan struct{})
	go func() {
		// Enqueued behind the runner's back, as another process would,
		// once the runner is asleep with nothing due.
		<-started
		enqueue(t, db, j)
		st.wakeups <- struct{}{}
	}()
	hs := hookedShared{sharedStore: st, beforeOldestDue: func() {
		select {
		case <-started:
		default:
			close(started)
		}
	}}
	begin := time.Now()
	got := runUntil(t, hs, cfg, func(w *store.Job) bool { return w.ID == j.ID && w.State == store.StateSucceeded })
	if got.State != store.StateSucceeded {
		t.Fatalf("job %s", got.State)
	}
	if el := time.Since(begin); el > 10*time.Second {
		t.Errorf("the job ran %s after start; a wakeup should not wait for the poll", el)
	}
}

// hookedShared is a sharedStore whose OldestDue calls a hook first (the
// scheduler calls OldestDue just before it sleeps).
type hookedShared struct {
	sharedStore
	beforeOldestDue func()
}

func (h hookedShared) OldestDue(s store.State) (time.Time, error) {
	h.beforeOldestDue()
	return h.sharedStore.OldestDue(s)
}
