package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// op is one write operation queued for the writer goroutine.
//
// fn must read and check everything before it writes anything: a refusal
// (any error not wrapped by fatal) must leave the transaction untouched, so
// the batch around it can still commit. Errors from bbolt writes are wrapped
// with fatal and abort the batch, whose operations are then re-run one by
// one. fn may therefore run more than once and must not keep state between
// runs.
type op struct {
	fn   func(tx *bbolt.Tx) error
	done chan error
}

// The writer lingers for more operations while its batch is smaller than
// lingerBelow, for at most Options.CommitLinger. With many expected writers
// both grow (lingerFor).
const (
	lingerBelow = 32
	// lingerWriters is the number of expected writers up to which the
	// base linger applies.
	lingerWriters = 100
	// maxLinger bounds the grown linger: it is added to the latency of a
	// lone write.
	maxLinger = time.Millisecond
)

// ExpectWriters tells the writer that n more goroutines will keep writing
// at once (a runner's workers), until release is called. A commit costs
// two fsyncs and a fixed amount of CPU whatever its size; when hundreds of
// writers share the store, waiting up to a millisecond for a batch of a
// quarter of them costs each little next to the length of its own cycle,
// and saves most of the commits. Up to 100 writers the fixed short linger
// stays in force, where a longer wait would cost more than it saves
// (BENCHMARKS.md, "Decisions").
func (db *DB) ExpectWriters(n int) (release func()) {
	if n <= 0 {
		return func() {}
	}
	db.writers.Add(int64(n))
	var once sync.Once
	return func() { once.Do(func() { db.writers.Add(-int64(n)) }) }
}

// lingerFor returns how long the writer waits for more operations, and
// the batch size that ends the wait early, for n expected writers.
func lingerFor(base time.Duration, n int64) (time.Duration, int) {
	if n <= lingerWriters || base <= 0 {
		return base, lingerBelow
	}
	d := min(time.Duration(int64(base)*n/lingerWriters), max(base, maxLinger))
	return d, int(max(int64(lingerBelow), n/4))
}

// fatalError marks an error that poisons the transaction it happened in.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err}
}

// write queues fn and waits until the transaction holding it has committed
// (nil, or fn's refusal) or failed.
func (db *DB) write(fn func(tx *bbolt.Tx) error) error {
	if db.ops == nil {
		return fmt.Errorf("store: %s was opened read-only", db.path)
	}
	if f := db.failed.Load(); f != nil {
		return *f
	}
	o := &op{fn: fn, done: make(chan error, 1)}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return store.ErrClosed
	}
	db.ops <- o
	db.mu.RUnlock()
	return <-o.done
}

// nothingWritten is what an operation returns when it changed nothing:
// an enqueue whose key already holds the same job, or one refused before
// it wrote. Its caller gets err (nil for "already stored"), and a batch
// whose operations all changed nothing is rolled back instead of
// committed, so a write that turns out to be a read costs no fsync. What
// such an operation read was committed by an earlier transaction, so it
// is on disk already.
func nothingWritten(err error) error { return &noWrite{err} }

type noWrite struct{ err error }

func (e *noWrite) Error() string { return "store: nothing written" }

// errRolledBack ends a batch in which no operation wrote.
var errRolledBack = errors.New("store: nothing to commit")

// writer is the single goroutine that commits operations in groups.
func (db *DB) writer() {
	defer close(db.stopped)
	batch := make([]*op, 0, db.opts.MaxBatch)
	for {
		var first *op
		select {
		case first = <-db.ops:
		case <-db.quit:
			// Close holds mu, so no new op can arrive; drain what is queued.
			for {
				select {
				case o := <-db.ops:
					db.commit([]*op{o})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		linger, below := lingerFor(db.opts.CommitLinger, db.writers.Load())
		below = min(below, db.opts.MaxBatch)
		lingered := false
	drain:
		for len(batch) < db.opts.MaxBatch {
			select {
			case o := <-db.ops:
				batch = append(batch, o)
			default:
				if lingered || len(batch) >= below || linger < 0 {
					break drain
				}
				// A commit costs two fsyncs whatever its size: a short
				// wait for more operations is cheaper than a second commit.
				lingered = true
				batch = db.linger(batch, below, linger)
			}
		}
		db.commit(batch)
	}
}

// commit runs a batch in one transaction and answers every operation
// after the commit. If the transaction fails before its meta page was
// written, nothing of it is visible and each operation runs alone, as a
// batch of one.
func (db *DB) commit(batch []*op) {
	if f := db.failed.Load(); f != nil {
		for _, o := range batch {
			o.done <- *f
		}
		return
	}
	results := make([]error, len(batch))
	err := db.runBatch(batch, results)
	switch {
	case err == nil || errors.Is(err, errRolledBack):
		// Committed, or nothing to commit (each answer then rests on an
		// earlier commit): either holds only while the file is still the
		// one at the path.
		if ferr := db.checkFile(); ferr != nil {
			db.fail(batch, ferr)
			return
		}
		if err == nil {
			db.commits.Add(1)
			db.committed.Add(uint64(len(batch)))
		}
		for i, o := range batch {
			o.done <- results[i]
		}
	case db.commitVisible():
		// The commit failed after bbolt wrote its meta page (the fsync
		// that follows failed): the page cache, which bbolt reads through
		// its map, now shows a transaction the disk may not hold. Re-run
		// alone, an enqueue would find its own job "already stored" and be
		// acknowledged with nothing durable; so nothing more is taken.
		db.fail(batch, db.metaWritten(err))
	case len(batch) == 1:
		batch[0].done <- unfatal(err)
	default:
		// An operation's fatal error, a refused commit, a file that could
		// not grow: one bad operation must not fail its neighbours.
		for _, o := range batch {
			db.commit([]*op{o})
		}
	}
}

// commitVisible reports whether the writer's last, failed transaction is
// what bbolt now reads: its meta page reached the page cache.
func (db *DB) commitVisible() bool {
	visible := false
	_ = db.read(func(tx *bbolt.Tx) error {
		visible = tx.ID() >= db.lastTx
		return nil
	})
	return visible
}

// metaWritten is the store.ErrFailed of a commit that failed with err after its
// meta page was written.
func (db *DB) metaWritten(err error) error {
	return fileErr(db.path, FileDamaged, fmt.Errorf("%w: the commit of %s failed after its meta page was written (%v): what the store reads may not be on disk; check the disk, then open it again (Check reports any damage)", store.ErrFailed, db.path, err))
}

// checkFile reports a file deleted or replaced since Open: a commit into
// it is durable in a file nobody will open again, and a second store may
// already be working the new one.
func (db *DB) checkFile() error {
	now, err := os.Stat(db.absPath)
	if err == nil && os.SameFile(db.file, now) || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil // the same file, or one that cannot be looked at now
	}
	why := "deleted"
	if err == nil {
		why = "replaced by another file"
	}
	return fmt.Errorf("%w: %s was %s while open: the last commit went to the old file; stop, and open the file now at the path again", store.ErrFailed, db.path, why)
}

// fail puts the store in the failed state with err, answering batch and
// every later write with it.
func (db *DB) fail(batch []*op, err error) {
	failed := err // published by address: never written again
	db.failed.CompareAndSwap(nil, &failed)
	first := *db.failed.Load()
	for _, o := range batch {
		o.done <- first
	}
}

func (db *DB) runBatch(batch []*op, results []error) (err error) {
	start := time.Now()
	defer func() {
		// Only committed transactions are told: not a batch rolled back
		// because nothing was written, nor one whose commit failed (its
		// operations are then re-run and told one by one).
		if fn := db.observer.Load(); fn != nil && err == nil {
			(*fn)(time.Since(start), len(batch))
		}
	}()
	db.counts = counts{}
	return db.update(func(tx *bbolt.Tx) error {
		db.lastTx = tx.ID()
		wrote := false
		for i, o := range batch {
			err := o.fn(tx)
			var fe *fatalError
			if errors.As(err, &fe) {
				return err
			}
			if nw, ok := err.(*noWrite); ok {
				results[i] = nw.err
				continue
			}
			wrote = true
			results[i] = err
		}
		if !wrote {
			return errRolledBack
		}
		if err := db.counts.flush(tx.Bucket(bucketMeta)); err != nil {
			return err
		}
		if db.opts.CommitHook != nil {
			if err := db.opts.CommitHook(len(batch)); err != nil {
				return fmt.Errorf("store: commit refused: %w", err)
			}
		}
		return nil
	})
}

func unfatal(err error) error {
	var fe *fatalError
	if errors.As(err, &fe) {
		return fmt.Errorf("store: write failed, nothing committed: %w", fe.err)
	}
	return fmt.Errorf("store: commit failed, nothing committed: %w", err)
}

// timerSlack is how late a Go timer may fire on Linux when the process
// has nothing else to do: the runtime then sleeps in epoll_pwait, whose
// timeout is in milliseconds, so a 200µs timer fires about a millisecond
// late. Lingers shorter than this are done by yielding instead.
const timerSlack = time.Millisecond

// idleYields is how many yields in a row without a new operation end a
// short linger: the goroutines that would write have had their turn.
const idleYields = 100

// linger collects more operations for up to d, or until the batch holds
// below: on a timer when d is at least timerSlack, by yielding otherwise
// (lingerYield).
func (db *DB) linger(batch []*op, below int, d time.Duration) []*op {
	if d < timerSlack {
		return db.lingerYield(batch, below, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for len(batch) < below {
		select {
		case o := <-db.ops:
			batch = append(batch, o)
		case <-t.C:
			return batch
		}
	}
	return batch
}

// lingerYield collects more operations for up to d, or until the batch
// holds below, by yielding the processor to the goroutines that produce
// them rather than sleeping on a timer (see timerSlack). It stops early
// after idleYields yields bring nothing: with nobody else runnable a lone
// write is committed within microseconds, not a timer tick later.
func (db *DB) lingerYield(batch []*op, below int, d time.Duration) []*op {
	deadline := time.Now().Add(d)
	for idle := 0; len(batch) < below && idle < idleYields; {
		select {
		case o := <-db.ops:
			batch = append(batch, o)
			idle = 0
			continue
		default:
		}
		if !time.Now().Before(deadline) {
			break
		}
		runtime.Gosched()
		idle++
	}
	return batch
}
