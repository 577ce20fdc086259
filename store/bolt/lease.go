package bolt

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
)

// leases are the runner leases of one handle. They live in memory: the
// file lock lets one process at a time open the file, so no runner of
// another process can be alive while this handle is, and a handle that
// opens the file finds every earlier runner's lease expired. Rescue then
// takes their running jobs through the same path a shared backend uses.
type leases struct {
	mu sync.Mutex
	m  map[string]*leaseEntry
}

type leaseEntry struct {
	store.Lease
	release func() // ends the runner's share of the expected writers
}

// Register starts the lease of a runner (see store.Work). Its workers
// count toward the writers the commit batching expects.
func (db *DB) Register(ctx context.Context, r store.RunnerInfo, now time.Time, ttl time.Duration) error {
	if r.ID == "" {
		return fmt.Errorf("store: a runner registers with an id")
	}
	if err := db.usable(ctx); err != nil {
		return err
	}
	if db.ops == nil {
		return fmt.Errorf("store: %s was opened read-only; a runner writes every claim", db.path)
	}
	db.leases.mu.Lock()
	defer db.leases.mu.Unlock()
	if db.leases.m == nil {
		db.leases.m = map[string]*leaseEntry{}
	}
	if _, ok := db.leases.m[r.ID]; ok {
		return fmt.Errorf("store: runner %s is already registered", r.ID)
	}
	db.leases.m[r.ID] = &leaseEntry{
		Lease:   store.Lease{RunnerInfo: r, Started: now, Expires: now.Add(ttl)},
		release: db.ExpectWriters(r.Workers),
	}
	return nil
}

// Heartbeat renews a runner's lease (see store.Work).
func (db *DB) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	if err := db.usable(ctx); err != nil {
		return err
	}
	db.leases.mu.Lock()
	defer db.leases.mu.Unlock()
	e, ok := db.leases.m[id]
	if !ok || !e.Alive(now) {
		return fmt.Errorf("%w: runner %s", store.ErrLeaseLost, id)
	}
	e.Expires = now.Add(ttl)
	return nil
}

// Deregister ends a runner's lease (see store.Work).
func (db *DB) Deregister(ctx context.Context, id string) error {
	if err := db.usable(ctx); err != nil {
		return err
	}
	db.leases.mu.Lock()
	defer db.leases.mu.Unlock()
	if e, ok := db.leases.m[id]; ok {
		e.release()
		delete(db.leases.m, id)
	}
	return nil
}

// Leases lists the runners registered with this handle, oldest first.
func (db *DB) Leases() ([]store.Lease, error) {
	if err := db.open(); err != nil {
		return nil, err
	}
	db.leases.mu.Lock()
	defer db.leases.mu.Unlock()
	out := make([]store.Lease, 0, len(db.leases.m))
	for _, e := range db.leases.m {
		out = append(out, e.Lease)
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return a.Started.Compare(b.Started) })
	return out, nil
}

// alive reports whether owner holds a lease at now.
func (db *DB) alive(owner string, now time.Time) bool {
	db.leases.mu.Lock()
	defer db.leases.mu.Unlock()
	e, ok := db.leases.m[owner]
	return ok && e.Alive(now)
}

// dropExpired ends the leases expired at now: their runners lost them.
func (db *DB) dropExpired(now time.Time) {
	db.leases.mu.Lock()
	defer db.leases.mu.Unlock()
	for id, e := range db.leases.m {
		if !e.Alive(now) {
			e.release()
			delete(db.leases.m, id)
		}
	}
}

// usable returns the error that refuses work on this handle, if any.
func (db *DB) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.open()
}

// Rescue moves running jobs whose owner holds no live lease to unknown
// (see store.Work). It reads the running part of the index to find them,
// so with no job to rescue it writes nothing, and moves them in batches,
// each job checked again inside the write.
func (db *DB) Rescue(ctx context.Context, now time.Time, fn func(j *store.Job)) (int, error) {
	db.dropExpired(now)
	total := 0
	// A running job whose record cannot be read (damaged, or missing
	// behind its index entry) is passed over, as claims pass over one: it
	// must not keep every other job running. Check reports it.
	damaged := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var ids [][]byte
		err := db.view(func(tx *bbolt.Tx) error {
			b := bucketsOf(tx)
			prefix := stateByte[store.StateRunning]
			c := b.index.Cursor()
			for k, _ := c.Seek([]byte{prefix}); k != nil && k[0] == prefix && len(ids) < db.opts.MaxBatch; k, _ = c.Next() {
				id := k[9:]
				if damaged[string(id)] {
					continue
				}
				j, err := b.load(id)
				if err == nil && db.alive(j.Owner, now) {
					continue
				}
				ids = append(ids, append([]byte(nil), id...))
			}
			return nil
		})
		if err != nil || len(ids) == 0 {
			return total, err
		}
		n := 0
		var bad [][]byte
		err = db.write(func(tx *bbolt.Tx) error {
			n, bad = 0, bad[:0]
			b := db.writeBuckets(tx)
			for _, id := range ids {
				old, err := b.load(id)
				if err != nil {
					bad = append(bad, id)
					continue
				}
				if old.State != store.StateRunning || db.alive(old.Owner, now) {
					continue
				}
				j := store.Rescued(old, now)
				if fn != nil {
					inCaller(func() { fn(j) })
					if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence+1 || j.Owner != old.Owner || j.State != store.StateUnknown || !store.SameRequest(old, j) {
						// The rescue's own fields and what the job sends are
						// the store's to set: a lowered fence would let the
						// old claim's outcome through.
						return fmt.Errorf("store: job %s: a rescue's fn may set the schedule and history, not the id, key, fence, owner, state or request", old.ID)
					}
				}
				if err := b.replace(old, j); err != nil {
					return err
				}
				n++
			}
			if n == 0 {
				return nothingWritten(nil)
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		for _, id := range bad {
			damaged[string(id)] = true
		}
		if n == 0 && len(bad) == 0 {
			return total, nil
		}
	}
}
