package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
	"github.com/idemrun/idemrun/store/storetest"
)

// received waits up to d for a wakeup on ch, and reports whether one came
// (a closed channel fails the test).
func received(t *testing.T, ch <-chan struct{}, d time.Duration) bool {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("the wakeups channel closed")
		}
		return true
	case <-time.After(d):
		return false
	}
}

// closes waits up to 5 s for ch to close, passing over wakeups.
func closes(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the wakeups channel is still open 5 s after %s", what)
		}
	}
}

// listeners returns the backends other than conn's that listen on the
// channel (the last statement they ran is its LISTEN).
func listeners(t *testing.T, conn *pgx.Conn, channel string) []int32 {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid() ORDER BY pid`,
		"LISTEN "+pgx.Identifier{channel}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// TestWakeups: a subscriber of handle a hears of b's enqueues and
// retries, on a connection outside a's pool; its channel closes when its
// context ends, and every channel when the handle closes.
func TestWakeups(t *testing.T) {
	a, u, schema := newStore(t, &postgres.Options{MaxConns: 1})
	b := openStore(t, u, &postgres.Options{Schema: schema})
	conn := connect(t, u)
	sub, cancel := context.WithCancel(ctx)
	ch := a.Wakeups(sub)
	if !received(t, ch, 5*time.Second) {
		t.Fatalf("no wakeup once the handle listens")
	}
	if pids := listeners(t, conn, a.Channel()); len(pids) != 1 {
		t.Fatalf("backends listening on %s: %v; want the handle's one", a.Channel(), pids)
	}
	// The listener holds no connection of the pool: its one is free.
	if _, err := a.Stats(); err != nil {
		t.Fatal(err)
	}

	now := storetest.T0()
	j := storetest.NewJob("wake-1", now)
	if _, err := b.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	if !received(t, ch, time.Second) {
		t.Fatalf("no wakeup within 1 s of another handle's Enqueue")
	}
	if received(t, ch, 50*time.Millisecond) {
		t.Errorf("a second wakeup for one Enqueue")
	}
	if res, err := b.Enqueue(ctx, j); err != nil || !res.Existing {
		t.Fatalf("Enqueue again = %+v, %v", res, err)
	}
	if received(t, ch, 100*time.Millisecond) {
		t.Errorf("a wakeup for an Enqueue that stored nothing")
	}

	cs, err := b.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %v, %v", cs, err)
	}
	if _, _, err := b.FinishClaim(ctx, cs[0], func(j *store.Job) error { j.State = store.StateFailed; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	received(t, ch, 50*time.Millisecond) // nothing is due, but a wakeup is harmless
	if _, err := b.Retry(ctx, j.ID, now, "test", "again"); err != nil {
		t.Fatal(err)
	}
	if !received(t, ch, time.Second) {
		t.Fatalf("no wakeup within 1 s of another handle's Retry")
	}

	other := a.Wakeups(ctx)
	cancel()
	closes(t, ch, "its context ended")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closes(t, other, "the handle closed")
	closes(t, a.Wakeups(ctx), "the handle closed")
	// The backend ends soon after the connection's Terminate.
	deadline := time.Now().Add(5 * time.Second)
	for pids := listeners(t, conn, a.Channel()); len(pids) != 0; pids = listeners(t, conn, a.Channel()) {
		if time.Now().After(deadline) {
			t.Fatalf("backends listening 5 s after Close: %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWakeupsReconnect: when the listening backend is ended, the handle
// connects again, wakes its subscribers (notifications may have been
// missed) and hears enqueues again.
func TestWakeupsReconnect(t *testing.T) {
	a, u, schema := newStore(t, nil)
	b := openStore(t, u, &postgres.Options{Schema: schema})
	conn := connect(t, u)
	kill := terminator(t, u)
	ch := a.Wakeups(ctx)
	if !received(t, ch, 5*time.Second) {
		t.Fatalf("no wakeup once the handle listens")
	}
	for round := range 3 {
		pids := listeners(t, conn, a.Channel())
		if len(pids) != 1 {
			t.Fatalf("round %d: listening backends %v; want one", round, pids)
		}
		kill(uint32(pids[0]))
		if !received(t, ch, 10*time.Second) {
			t.Fatalf("round %d: no wakeup within 10 s of the listener's backend ending", round)
		}
		if now := listeners(t, conn, a.Channel()); len(now) != 1 || now[0] == pids[0] {
			t.Fatalf("round %d: listening backends %v after the reconnection; want one new one", round, now)
		}
		if _, err := b.Enqueue(ctx, storetest.NewJob("again-"+string(rune('a'+round)), storetest.T0())); err != nil {
			t.Fatal(err)
		}
		if !received(t, ch, time.Second) {
			t.Fatalf("round %d: no wakeup within 1 s of an Enqueue after the reconnection", round)
		}
	}
}

// TestWakeupsPollOnly: with PollOnly no connection listens and the
// channel never receives, but writes still notify (for handles that
// listen); the channel closes with its context.
func TestWakeupsPollOnly(t *testing.T) {
	db, u, _ := newStore(t, &postgres.Options{PollOnly: true})
	conn := connect(t, u)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{db.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	sub, cancel := context.WithCancel(ctx)
	ch := db.Wakeups(sub)
	if _, err := db.Enqueue(ctx, storetest.NewJob("poll", storetest.T0())); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if n, err := conn.WaitForNotification(wctx); err != nil || n.Channel != db.Channel() {
		t.Errorf("notification of a PollOnly handle's Enqueue = %+v, %v; want one on %s", n, err, db.Channel())
	}
	if received(t, ch, 200*time.Millisecond) {
		t.Errorf("a PollOnly handle's channel received")
	}
	if pids := listeners(t, conn, db.Channel()); len(pids) != 0 {
		t.Errorf("backends listening for a PollOnly handle: %v; want none", pids)
	}
	cancel()
	closes(t, ch, "its context ended")
}
