package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
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
	fn   func(tx *bolt.Tx) error
	done chan error
}

// lingerBelow is the batch size under which the writer lingers.
const lingerBelow = 32

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
func (db *DB) write(fn func(tx *bolt.Tx) error) error {
	if db.ops == nil {
		return fmt.Errorf("store: %s was opened read-only", db.path)
	}
	o := &op{fn: fn, done: make(chan error, 1)}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return ErrClosed
	}
	db.ops <- o
	db.mu.RUnlock()
	return <-o.done
}

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
		lingered := false
	drain:
		for len(batch) < db.opts.MaxBatch {
			select {
			case o := <-db.ops:
				batch = append(batch, o)
			default:
				if lingered || len(batch) >= lingerBelow || db.opts.CommitLinger < 0 {
					break drain
				}
				// A commit costs two fsyncs whatever its size: a short
				// wait for more operations is cheaper than a second commit.
				lingered = true
				t := time.NewTimer(db.opts.CommitLinger)
			linger:
				for len(batch) < lingerBelow {
					select {
					case o := <-db.ops:
						batch = append(batch, o)
					case <-t.C:
						break linger
					}
				}
				t.Stop()
			}
		}
		db.commit(batch)
	}
}

// commit runs a batch in one transaction and acknowledges every operation
// after the commit. If the transaction fails, each operation runs alone.
func (db *DB) commit(batch []*op) {
	results := make([]error, len(batch))
	err := db.runBatch(batch, results)
	if err == nil {
		db.ack(batch, results)
		return
	}
	if len(batch) == 1 {
		batch[0].done <- unfatal(err)
		return
	}
	for _, o := range batch {
		res := make([]error, 1)
		if err := db.runBatch([]*op{o}, res); err != nil {
			o.done <- unfatal(err)
			continue
		}
		db.ack([]*op{o}, res)
	}
}

func (db *DB) ack(batch []*op, results []error) {
	db.commits.Add(1)
	db.committed.Add(uint64(len(batch)))
	for i, o := range batch {
		o.done <- results[i]
	}
}

func (db *DB) runBatch(batch []*op, results []error) error {
	start := time.Now()
	defer func() {
		if fn := db.observer.Load(); fn != nil {
			(*fn)(time.Since(start), len(batch))
		}
	}()
	return db.update(func(tx *bolt.Tx) error {
		for i, o := range batch {
			err := o.fn(tx)
			var fe *fatalError
			if errors.As(err, &fe) {
				return err
			}
			results[i] = err
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
