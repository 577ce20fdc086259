package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
	"github.com/idemrun/idemrun/store/storetest"
)

// TestNotifyBurst: a burst of single enqueues sends far fewer
// notifications than jobs, at most one per few milliseconds, yet a
// claimer that claims only when woken claims every job without polling:
// the last enqueue is announced after it committed.
func TestNotifyBurst(t *testing.T) {
	const n, senders = 1000, 8
	a, u, schema := newStore(t, nil)
	b := openStore(t, u, &postgres.Options{Schema: schema})
	conn := connect(t, u)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	var notes atomic.Int64
	countCtx, stopCounting := context.WithCancel(ctx)
	counted := make(chan struct{})
	t.Cleanup(func() { stopCounting(); <-counted }) // before conn closes
	go func() {
		defer close(counted)
		for {
			if _, err := conn.WaitForNotification(countCtx); err != nil {
				return
			}
			notes.Add(1)
		}
	}()

	ch := a.Wakeups(ctx)
	if !received(t, ch, 5*time.Second) {
		t.Fatalf("no wakeup once the handle listens")
	}
	now := storetest.T0()
	claimed := make(chan int, 1)
	claimCtx, stopClaiming := context.WithTimeout(ctx, 60*time.Second)
	claimerDone := make(chan struct{})
	t.Cleanup(func() { stopClaiming(); <-claimerDone }) // before a closes
	go func() {
		defer close(claimerDone)
		total := 0
		defer func() { claimed <- total }()
		for total < n {
			select {
			case <-ch:
			case <-claimCtx.Done():
				return
			}
			cs, err := a.ClaimDue(claimCtx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: n})
			if err != nil {
				t.Error(err)
				return
			}
			total += len(cs)
		}
	}()

	// Single enqueues from several goroutines, as an application's
	// request handlers send them.
	start := time.Now()
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := g; i < n; i += senders {
				if _, err := b.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("burst-%04d", i), now)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if t.Failed() {
		t.FailNow()
	}
	select {
	case total := <-claimed:
		if total != n {
			t.Fatalf("the woken claimer claimed %d of %d jobs", total, n)
		}
	case <-time.After(took + 2*time.Second):
		t.Fatalf("the woken claimer had not claimed every job 2 s after the burst: a commit was not announced after it")
	}
	time.Sleep(100 * time.Millisecond) // the last notifications in flight
	stopCounting()
	<-counted
	got := notes.Load()
	t.Logf("%d enqueues in %v sent %d notifications", n, took, got)
	// The debounce's promise is a bound per window, whatever the load:
	// how much fewer than the enqueues depends on how fast they came.
	if got < 1 || got >= n || got > int64(took/(5*time.Millisecond))+2 {
		t.Errorf("%d enqueues in %v sent %d notifications; want fewer than the enqueues, at most one per 5 ms", n, took, got)
	}
}

// TestNotifyCloseFlushes: an enqueue whose notification was held back
// for the window is still announced when the handle closes before the
// window ends.
func TestNotifyCloseFlushes(t *testing.T) {
	_, u, schema := newStore(t, nil)
	b := openStore(t, u, &postgres.Options{Schema: schema})
	conn := connect(t, u)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	now := storetest.T0()
	for i := range 2 {
		if _, err := b.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("flush-%d", i), now)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := conn.WaitForNotification(wctx); err != nil {
			t.Fatalf("notification %d of the 2 enqueues: %v", i+1, err)
		}
	}
}
