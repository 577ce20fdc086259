package bolt_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// manyBatch is large enough that EnqueueManyFunc makes its jobs in several
// chunks while the writer inserts the first ones.
const manyBatch = 1000

// TestEnqueueManyFuncChunks: over several chunks, every result is the one
// of its own item, in order: build errors, nil jobs, a key already stored,
// and keys repeated across chunks of the same call, with the same request
// (the earlier job) or another (a conflict).
func TestEnqueueManyFuncChunks(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	pre := storetest.NewJob("pre", now)
	if _, err := db.Enqueue(ctx, pre); err != nil {
		t.Fatal(err)
	}
	errBuild := errors.New("bad item")
	jobs := make([]*store.Job, manyBatch)
	var calls [manyBatch]atomic.Int32
	build := func(i int) (*store.Job, error) {
		calls[i].Add(1)
		switch {
		case i%97 == 5:
			return nil, fmt.Errorf("item %d: %w", i, errBuild)
		case i%101 == 7:
			return nil, nil
		}
		j := storetest.NewJob(fmt.Sprintf("k-%d", i), now)
		switch i {
		case 500:
			j = storetest.NewJob("pre", now) // same request as the stored job
		case 900:
			j = storetest.NewJob("k-10", now) // same request as item 10
		case 901:
			j = storetest.NewJob("k-11", now)
			j.Fingerprint = "another request"
		}
		jobs[i] = j
		return j, nil
	}
	rs, err := db.EnqueueManyFunc(ctx, manyBatch, build)
	if err != nil {
		t.Fatalf("EnqueueManyFunc: %v", err)
	}
	if len(rs) != manyBatch {
		t.Fatalf("%d results; want %d", len(rs), manyBatch)
	}
	added := 0
	for i, r := range rs {
		if c := calls[i].Load(); c != 1 {
			t.Errorf("build(%d) called %d times; want once", i, c)
		}
		switch {
		case i%97 == 5:
			if !errors.Is(r.Err, errBuild) || r.Job != nil {
				t.Errorf("result %d = %+v; want the build error", i, r)
			}
		case i%101 == 7:
			if r.Err == nil || r.Job != nil {
				t.Errorf("result %d (nil job) = %+v; want an error", i, r)
			}
		case i == 500:
			if r.Err != nil || !r.Existing || r.Job.ID != pre.ID {
				t.Errorf("result %d (key of a stored job) = %+v; want Existing job %s", i, r, pre.ID)
			}
		case i == 900:
			if r.Err != nil || !r.Existing || r.Job.ID != jobs[10].ID {
				t.Errorf("result %d (key of item 10) = %+v; want Existing job %s", i, r, jobs[10].ID)
			}
		case i == 901:
			var ke *store.KeyConflictError
			if !errors.As(r.Err, &ke) || ke.JobID != jobs[11].ID || r.Job != nil {
				t.Errorf("result %d (key of item 11, another request) = %+v; want a conflict naming %s", i, r, jobs[11].ID)
			}
		default:
			if r.Err != nil || r.Existing || r.Job == nil || r.Job.ID != jobs[i].ID || r.Job.Key != jobs[i].Key {
				t.Fatalf("result %d = %+v; want new job %s", i, r, jobs[i].ID)
			}
			got, err := db.GetByKey(jobs[i].Key)
			if err != nil || got.ID != jobs[i].ID {
				t.Errorf("GetByKey(%s) = %v, %v; want job %s", jobs[i].Key, got, err, jobs[i].ID)
			}
			added++
		}
	}
	if st, _ := db.Stats(); st[store.StatePending] != int64(added+1) {
		t.Errorf("Stats = %v; want %d pending", st, added+1)
	}
}

// TestEnqueueManyFuncFailedCommit: a commit that fails writes none of the
// jobs, every build call has returned, and the same items go in afterwards.
func TestEnqueueManyFuncFailedCommit(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	db, _ := newDB(t, &bolt.Options{CommitHook: func(int) error {
		if fail.Load() {
			return errInjected
		}
		return nil
	}})
	now := storetest.T0()
	var calls atomic.Int32
	build := func(i int) (*store.Job, error) {
		calls.Add(1)
		return storetest.NewJob(fmt.Sprintf("f-%d", i), now), nil
	}
	if rs, err := db.EnqueueManyFunc(ctx, manyBatch, build); !errors.Is(err, errInjected) || rs != nil {
		t.Fatalf("EnqueueManyFunc under a failing commit = %d results, %v; want the injected error", len(rs), err)
	}
	if c := calls.Load(); c != manyBatch {
		t.Errorf("%d build calls had returned when EnqueueManyFunc did; want %d", c, manyBatch)
	}
	if st, _ := db.Stats(); st[store.StatePending] != 0 {
		t.Errorf("Stats = %v; want nothing stored", st)
	}
	fail.Store(false)
	rs, err := db.EnqueueManyFunc(ctx, manyBatch, build)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Existing {
			t.Fatalf("result %d after the failure = %+v; want a new job", i, r)
		}
	}
	if st, _ := db.Stats(); st[store.StatePending] != manyBatch {
		t.Errorf("Stats = %v; want %d pending", st, manyBatch)
	}
}

// TestEnqueueManyFuncRetriedAlone: when the batch holding an EnqueueManyFunc
// fails, the writer runs it again alone; it inserts the jobs it already
// made (build is not called again) and they are all stored once.
func TestEnqueueManyFuncRetriedAlone(t *testing.T) {
	db, failed := openFailingSharedCommit(t)
	now := storetest.T0()
	for round := 0; round < 10; round++ {
		var built atomic.Int32
		var rs []store.EnqueueResult
		var manyErr, oneErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			rs, manyErr = db.EnqueueManyFunc(ctx, manyBatch, func(i int) (*store.Job, error) {
				built.Add(1)
				return storetest.NewJob(fmt.Sprintf("r%d-%d", round, i), now), nil
			})
		}()
		go func() {
			defer wg.Done()
			_, oneErr = db.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("one-%d", round), now))
		}()
		wg.Wait()
		if manyErr != nil || oneErr != nil {
			t.Fatalf("round %d: EnqueueManyFunc err %v, Enqueue err %v; want both stored", round, manyErr, oneErr)
		}
		if b := built.Load(); b != manyBatch {
			t.Errorf("round %d: build called %d times; want %d", round, b, manyBatch)
		}
		for i, r := range rs {
			if r.Err != nil || r.Existing {
				t.Fatalf("round %d: result %d = %+v; want a new job", round, i, r)
			}
		}
		if _, err := db.GetByKey(fmt.Sprintf("one-%d", round)); err != nil {
			t.Errorf("round %d: the single enqueue is not stored: %v", round, err)
		}
		if failed() != "" {
			break
		}
	}
	if failed() == "" {
		t.Fatalf("no commit held both writes in 10 rounds")
	}
	st, _ := db.Stats()
	var total int64
	for _, n := range st {
		total += n
	}
	if total%(manyBatch+1) != 0 || total == 0 || st[store.StatePending] != total {
		t.Errorf("Stats = %v; want whole rounds of %d pending jobs", st, manyBatch+1)
	}
}

// TestEnqueueManyFuncClosed: on a closed store nothing is written and, as
// always, every build call has returned when EnqueueManyFunc does.
func TestEnqueueManyFuncClosed(t *testing.T) {
	db, _ := newDB(t, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	now := storetest.T0()
	var calls atomic.Int32
	_, err := db.EnqueueManyFunc(ctx, manyBatch, func(i int) (*store.Job, error) {
		calls.Add(1)
		return storetest.NewJob(fmt.Sprintf("c-%d", i), now), nil
	})
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("EnqueueManyFunc on a closed store: err = %v; want ErrClosed", err)
	}
	if c := calls.Load(); c != manyBatch {
		t.Errorf("%d build calls had returned when EnqueueManyFunc did; want %d", c, manyBatch)
	}
}

// TestNothingWrittenNothingCommitted: an enqueue that finds its job
// already stored, and an EnqueueMany whose every item is refused or
// already stored, commit nothing (no fsync for a read) and still answer
// each caller; a batch where one operation writes commits for all.
func TestNothingWrittenNothingCommitted(t *testing.T) {
	var hookCalls atomic.Int32
	db, _ := newDB(t, &bolt.Options{CommitHook: func(int) error { hookCalls.Add(1); return nil }})
	now := storetest.T0()
	a := storetest.NewJob("a", now)
	if _, err := db.Enqueue(ctx, a); err != nil {
		t.Fatal(err)
	}
	commits0, _ := db.Counters()
	hooks0 := hookCalls.Load()

	res, err := db.Enqueue(ctx, storetest.NewJob("a", now))
	if err != nil || !res.Existing || res.Job.ID != a.ID {
		t.Fatalf("Enqueue of a stored key = %+v, %v; want Existing job %s", res, err, a.ID)
	}
	other := storetest.NewJob("a", now)
	other.Fingerprint = "another request"
	if _, err := db.Enqueue(ctx, other); !errors.Is(err, store.ErrKeyConflict) {
		t.Fatalf("Enqueue of a stored key with another request: err %v; want a key conflict", err)
	}
	rs, err := db.EnqueueManyFunc(ctx, manyBatch, func(i int) (*store.Job, error) {
		if i == 0 {
			return storetest.NewJob("a", now), nil
		}
		return nil, errors.New("refused")
	})
	if err != nil || len(rs) != manyBatch || !rs[0].Existing || rs[0].Job.ID != a.ID || rs[1].Err == nil {
		t.Fatalf("EnqueueManyFunc with nothing to insert = %d results, %v; want item 0 Existing and the rest refused", len(rs), err)
	}
	if commits, _ := db.Counters(); commits != commits0 {
		t.Errorf("reads committed %d times; want 0", commits-commits0)
	}
	if h := hookCalls.Load(); h != hooks0 {
		t.Errorf("commit hook ran %d times for reads; want 0", h-hooks0)
	}

	// One writer among readers: a single commit that answers everyone.
	var wg sync.WaitGroup
	results := make([]store.EnqueueResult, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "a"
			if i == 0 {
				key = "b"
			}
			results[i], errs[i] = db.Enqueue(ctx, storetest.NewJob(key, now))
		}()
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || results[i].Job == nil || results[i].Existing == (i == 0) {
			t.Errorf("concurrent enqueue %d = %+v, %v", i, results[i], errs[i])
		}
	}
	if commits, _ := db.Counters(); commits == commits0 {
		t.Errorf("the new job b was acknowledged without a commit")
	}
	if got, err := db.GetByKey("b"); err != nil || got.ID != results[0].Job.ID {
		t.Errorf("GetByKey(b) = %v, %v; want the acknowledged job", got, err)
	}
}

// TestNothingWrittenRetriedAlone: when a batch fails, an operation that
// wrote nothing is run again alone like any other and its caller still
// gets its own answer (here a key conflict), not nil.
func TestNothingWrittenRetriedAlone(t *testing.T) {
	db, failed := openFailingSharedCommit(t)
	now := storetest.T0()
	if _, err := db.Enqueue(ctx, storetest.NewJob("held", now)); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 10; round++ {
		var wg sync.WaitGroup
		var conflictErr, newErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			j := storetest.NewJob("held", now)
			j.Fingerprint = "another request"
			_, conflictErr = db.Enqueue(ctx, j)
		}()
		go func() {
			defer wg.Done()
			_, newErr = db.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("new-%d", round), now))
		}()
		wg.Wait()
		if !errors.Is(conflictErr, store.ErrKeyConflict) {
			t.Fatalf("round %d: conflicting enqueue err = %v; want a key conflict", round, conflictErr)
		}
		if newErr != nil {
			t.Fatalf("round %d: new enqueue err = %v; want it stored", round, newErr)
		}
		if _, err := db.GetByKey(fmt.Sprintf("new-%d", round)); err != nil {
			t.Fatalf("round %d: new job not stored: %v", round, err)
		}
		if failed() != "" {
			return
		}
	}
	t.Fatalf("no commit held both writes in 10 rounds")
}

// openFailingSharedCommit opens a store whose first commit holding more
// than one operation fails, so that each of its operations runs again
// alone; a long linger gathers two concurrent writes into one batch.
// failed reports that commit ("" until it happened).
func openFailingSharedCommit(t *testing.T) (db *bolt.DB, failed func() string) {
	var (
		mu     sync.Mutex
		calls  []int
		failAt = -1
	)
	db, _ = newDB(t, &bolt.Options{
		CommitLinger: 50 * time.Millisecond,
		MaxBatch:     2,
		CommitHook: func(ops int) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, ops)
			if ops > 1 && failAt < 0 {
				failAt = len(calls) - 1
				return errInjected
			}
			return nil
		},
	})
	return db, func() string {
		mu.Lock()
		defer mu.Unlock()
		if failAt < 0 {
			return ""
		}
		return fmt.Sprintf("commit %d of %v", failAt, calls)
	}
}
