package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// notifyWindow is the shortest time between two notifications a handle
// sends: a burst of enqueues wakes the listeners a few times, not once
// per job.
const notifyWindow = 10 * time.Millisecond

// notifySQL announces work on a channel; listeners only need to know
// that there is some, so the payload is empty.
const notifySQL = `SELECT pg_notify($1, '')`

// channelName is the LISTEN/NOTIFY channel of a schema: "idemrun." and
// the schema, or, past Postgres's 63 bytes, a prefix of it and a hash of
// the whole, so schemas that share a long prefix do not share a channel.
func channelName(schema string) string {
	const prefix = "idemrun."
	if name := prefix + schema; len(name) <= 63 {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	sum := fmt.Sprintf(".%016x", h.Sum64())
	cut := 63 - len(prefix) - len(sum)
	for cut > 0 && !utf8.RuneStart(schema[cut]) {
		cut--
	}
	return prefix + schema[:cut] + sum
}

// Channel returns the LISTEN/NOTIFY channel on which writes that make
// work due are announced (see Wakeups). Pass it to pg_notify as it is,
// and quote it as an identifier for LISTEN.
func (db *DB) Channel() string { return db.notify.channel }

// notifier spaces a handle's notifications at least notifyWindow apart.
// A transaction that commits inside the window sends none itself; once it
// has committed, a trailing notification is sent from the pool at the
// window's end, so what it wrote is announced after it is visible.
type notifier struct {
	channel string
	send    func(ctx context.Context) // a notification outside any transaction

	mu       sync.Mutex
	last     time.Time   // when the latest notification was sent or claimed
	timer    *time.Timer // the trailing notification, while one is scheduled
	closed   bool
	inflight sync.WaitGroup // trailing notifications scheduled or sending
}

// inTx adds a notification to tx unless one was sent within the window,
// or a trailing one is about to be. It reports whether it held the
// notification back: the caller then calls trail once tx has committed.
func (n *notifier) inTx(ctx context.Context, tx pgx.Tx) (held bool, err error) {
	n.mu.Lock()
	now := time.Now()
	held = n.timer != nil || !n.last.IsZero() && now.Sub(n.last) < notifyWindow
	if !held {
		n.last = now
	}
	n.mu.Unlock()
	if held {
		return true, nil
	}
	_, err = tx.Exec(ctx, notifySQL, n.channel)
	return false, err
}

// trail makes sure a notification is sent after now, at the end of the
// window. A trailing notification already scheduled will do: it is sent
// after this call.
func (n *notifier) trail() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.timer != nil || n.closed {
		return
	}
	n.inflight.Add(1)
	n.timer = time.AfterFunc(max(0, notifyWindow-time.Since(n.last)), n.fire)
}

// fire sends the trailing notification. It unschedules itself first: a
// commit after that schedules the next one.
func (n *notifier) fire() {
	defer n.inflight.Done()
	n.mu.Lock()
	n.timer = nil
	n.last = time.Now()
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.send(ctx)
}

// close sends a scheduled trailing notification at once, and waits for
// one being sent: what was committed is still announced.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	t := n.timer
	n.mu.Unlock()
	if t != nil && t.Stop() {
		n.fire() // in the timer's place: its Done is the timer's
	}
	n.inflight.Wait()
}
