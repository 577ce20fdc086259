package postgres

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection of the listening connection: full jitter, a random wait
// up to an exponential bound, capped so wakeups resume soon after the
// server does.
const (
	listenBackoffBase = 100 * time.Millisecond
	listenBackoffCap  = 3 * time.Second
	// listenConnectTimeout bounds a connection attempt when the URL sets
	// no connect_timeout.
	listenConnectTimeout = 10 * time.Second
)

// wakeups hands the notifications of the handle's listening connection
// to the channels Wakeups returned.
type wakeups struct {
	mu        sync.Mutex
	subs      map[chan struct{}]func() bool // each channel and its context's AfterFunc stop
	listening bool                          // the connection listens now
	started   bool                          // the listener runs
	closed    bool
}

// Wakeups returns a channel that receives after another handle (or this
// one) commits a write that makes work due (see store.Wakeups): a new
// job, a retried one. Several announcements may merge into one receive.
// It also receives once the handle listens, and again after each
// reconnection, since announcements may have been missed meanwhile. It is
// closed when ctx ends or the handle is closed.
//
// The first call starts a listener on a connection of its own, outside
// the pool's MaxConns; a lost connection is made again, after a random
// wait of up to a few seconds. With Options.PollOnly there is no
// listener: the channel never receives, and callers poll.
func (db *DB) Wakeups(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	w := &db.wake
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || ctx.Err() != nil {
		close(ch)
		return ch
	}
	if w.subs == nil {
		w.subs = map[chan struct{}]func() bool{}
	}
	w.subs[ch] = context.AfterFunc(ctx, func() { w.drop(ch) })
	if w.listening {
		ch <- struct{}{}
	}
	if !w.started && db.listenCfg != nil {
		w.started = true
		db.workers.Go(db.listen)
	}
	return ch
}

// drop closes and forgets one subscriber's channel.
func (w *wakeups) drop(ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.subs[ch]; ok {
		delete(w.subs, ch)
		close(ch)
	}
}

// wake sends to every subscriber that has no wakeup waiting.
func (w *wakeups) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *wakeups) setListening(on bool) {
	w.mu.Lock()
	w.listening = on
	w.mu.Unlock()
	if on {
		w.wake()
	}
}

// close closes every subscriber's channel; Wakeups then returns closed
// ones, and starts no listener.
func (w *wakeups) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for ch, stop := range w.subs {
		stop()
		close(ch)
	}
	w.subs = nil
}

// listen keeps a connection listening on the handle's channel until the
// handle is closed: each attempt is bounded by a connect timeout, each
// wait after a failure by listenBackoffCap.
func (db *DB) listen() {
	failures := 0
	for db.life.Err() == nil {
		listened := db.listenOnce()
		db.wake.setListening(false)
		if listened {
			failures = 0
		}
		failures++
		bound := min(listenBackoffCap, listenBackoffBase<<min(failures, 10))
		t := time.NewTimer(rand.N(bound))
		select {
		case <-db.life.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// listenOnce connects, listens, and hands notifications on until the
// connection fails or the handle is closed. It reports whether it got to
// listen.
func (db *DB) listenOnce() (listened bool) {
	timeout := db.listenCfg.ConnectTimeout
	if timeout <= 0 {
		timeout = listenConnectTimeout
	}
	cctx, cancel := context.WithTimeout(db.life, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, db.listenCfg)
	if err != nil {
		return false
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(ctx)
	}()
	if _, err := conn.Exec(cctx, `LISTEN `+pgx.Identifier{db.notify.channel}.Sanitize()); err != nil {
		return false
	}
	db.wake.setListening(true)
	for {
		if _, err := conn.WaitForNotification(db.life); err != nil {
			return true
		}
		db.wake.wake()
	}
}
