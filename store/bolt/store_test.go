package bolt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

var _ storetest.Store = (*bolt.DB)(nil)

var ctx = context.Background()

// openAt opens the store at path and, when the test ends, fails it unless
// Check finds the file sound, then closes it. A store the test closed
// itself is skipped.
func openAt(t testing.TB, path string, o *bolt.Options) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		rep, err := db.Check()
		if errors.Is(err, store.ErrClosed) {
			return
		}
		if err != nil || !rep.OK() {
			t.Errorf("Check after the test = %+v, %v; want no problems", rep, err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func newDB(t testing.TB, o *bolt.Options) (*bolt.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idemrun.db")
	return openAt(t, path, o), path
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		db, _ := newDB(t, nil)
		return db
	})
}

func TestReopenDurability(t *testing.T) {
	db, path := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("durable", now)
	j.Request.Body = []byte{0, 0xff, '\r', '\n', 'x'}
	j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "x-Mixed-Case", Value: "  v  "})
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, nil)
	got, err := db.Get(j.ID)
	if err != nil {
		t.Fatalf("Get after reopen: %v", err)
	}
	if !reflect.DeepEqual(got.Request, j.Request) {
		t.Errorf("request after reopen:\n got  %+v\n want %+v", got.Request, j.Request)
	}
	if got.Key != j.Key || got.Fingerprint != j.Fingerprint || got.State != store.StatePending || !got.NextRunAt.Equal(j.NextRunAt) {
		t.Errorf("job after reopen = %+v; want %+v", got, j)
	}
	if byKey, err := db.GetByKey("durable"); err != nil || byKey.ID != j.ID {
		t.Errorf("GetByKey after reopen = %v, %v; want job %s", byKey, err, j.ID)
	}
	if st, _ := db.Stats(); st[store.StatePending] != 1 {
		t.Errorf("Stats after reopen = %v; want 1 pending", st)
	}
}

func TestClaimDurable(t *testing.T) {
	db, path := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("claimed", now)
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1, Prepare: func(j *store.Job) {
		j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
	}})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %v, %v", cs, err)
	}
	// The process dies here, before the attempt's outcome is written.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, nil)
	got, err := db.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateRunning || got.Attempts != 1 || got.Fence != cs[0].Fence || got.LastEvent(store.EventAttempt) == nil {
		t.Fatalf("after reopen: %s, attempts %d, fence %d, attempt event %v; want running, 1, %d, present", got.State, got.Attempts, got.Fence, got.LastEvent(store.EventAttempt), cs[0].Fence)
	}
	if n, err := db.Rescue(ctx, now.Add(time.Minute), nil); err != nil || n != 1 {
		t.Fatalf("RecoverRunning = %d, %v; want 1", n, err)
	}
	if got, _ := db.Get(j.ID); got.State != store.StateUnknown || !got.MayHaveEffect {
		t.Errorf("after recovery: %s, MayHaveEffect %v; want unknown, true", got.State, got.MayHaveEffect)
	}
}

func TestRecoverRunningManyBatches(t *testing.T) {
	db, _ := newDB(t, &bolt.Options{MaxBatch: 10})
	now := storetest.T0()
	const n = 35
	var jobs []*store.Job
	for i := range n {
		jobs = append(jobs, storetest.NewJob(fmt.Sprintf("r-%d", i), now))
	}
	if _, err := db.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	claimed := 0
	for range n {
		cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 8})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			break
		}
		claimed += len(cs)
	}
	if claimed != n {
		t.Fatalf("claimed %d; want %d", claimed, n)
	}
	got, err := db.Rescue(ctx, now.Add(time.Minute), nil)
	if err != nil || got != n {
		t.Errorf("RecoverRunning over batches of 10 = %d, %v; want %d", got, err, n)
	}
	if st, _ := db.Stats(); st[store.StateUnknown] != n || st[store.StateRunning] != 0 {
		t.Errorf("Stats = %v; want %d unknown", st, n)
	}
}

// TestClaimDueAllOrNothing: when ClaimDue fails, it must claim nothing. A
// job left running that no worker holds would wait for crash recovery
// (and then count as a possibly-sent attempt) although nothing was sent.
func TestClaimDueAllOrNothing(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	for i, k := range []string{"a", "b"} {
		j := storetest.NewJob(k, now)
		j.NextRunAt = now.Add(time.Duration(i-2) * time.Second)
		if _, err := db.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	const unstorable = store.State("bogus") // a record cannot encode an unknown state
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 10, Prepare: func(j *store.Job) {
		if j.Key == "b" {
			j.State = unstorable
		}
	}})
	if err == nil {
		t.Fatalf("ClaimDue with an unstorable job = %d claims, nil; want an error", len(cs))
	}
	if st, _ := db.Stats(); st[store.StateRunning] != 0 || st[store.StatePending] != 2 {
		t.Errorf("after a failed ClaimDue: Stats = %v; want 2 pending, 0 running (nothing claimed)", st)
	}

	// A Finish that cannot be stored is refused whole.
	cs, err = db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %d, %v", len(cs), err)
	}
	before, _ := db.Get(cs[0].Job.ID)
	if _, err := db.Finish(ctx, before.ID, cs[0].Fence, func(j *store.Job) error {
		j.State = unstorable
		return nil
	}); err == nil {
		t.Errorf("Finish with an unstorable state: nil error; want a refusal")
	}
	if after, _ := db.Get(before.ID); !reflect.DeepEqual(after, before) {
		t.Errorf("refused Finish changed the job:\n got  %+v\n want %+v", after, before)
	}
}

func TestCloseRefusesWrites(t *testing.T) {
	db, _ := newDB(t, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	now := storetest.T0()
	if _, err := db.Enqueue(ctx, storetest.NewJob("late", now)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Enqueue after Close: err = %v; want ErrClosed", err)
	}
	if _, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ClaimDue after Close: err = %v; want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

func TestFileMode(t *testing.T) {
	_, path := newDB(t, nil)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode of a new database = %v; want -rw-------", fi.Mode().Perm())
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rng := rand.NewChaCha8([32]byte{'i', 'd', 'e', 'm'})
	random := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	// boltFile makes a bbolt file as another program would.
	boltFile := func(name string, fn func(tx *bbolt.Tx) error) string {
		p := filepath.Join(dir, name)
		bdb, err := bbolt.Open(p, 0o600, &bbolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := bdb.Update(fn); err != nil {
			t.Fatal(err)
		}
		if err := bdb.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	schema := func(v uint32, app string) func(tx *bbolt.Tx) error {
		return func(tx *bbolt.Tx) error {
			meta, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			b := make([]byte, 4)
			binary.BigEndian.PutUint32(b, v)
			if err := meta.Put([]byte("schema"), b); err != nil {
				return err
			}
			if err := meta.Put([]byte("app"), []byte(app)); err != nil {
				return err
			}
			for _, name := range []string{"jobs", "keys", "index"} {
				if _, err := tx.CreateBucket([]byte(name)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	subdir := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}

	// problem is the FileError's Problem, 0 for none: a file of another
	// program or a newer idemrun is not damaged, a missing one is
	// ErrNoDatabase alone.
	cases := []struct {
		name    string
		path    string
		opts    *bolt.Options
		want    error
		problem bolt.FileProblem
	}{
		{"directory", subdir, nil, bolt.ErrNotDatabase, bolt.FileIsDirectory},
		{"small random file", write("small", random(100)), nil, bolt.ErrNotDatabase, bolt.FileDamaged},
		{"large random file", write("large", random(64<<10)), nil, bolt.ErrNotDatabase, bolt.FileDamaged},
		{"zeros", write("zeros", make([]byte, 32<<10)), nil, bolt.ErrNotDatabase, bolt.FileDamaged},
		{"other program's bbolt file", boltFile("other.db", func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucket([]byte("foo"))
			return err
		}), nil, bolt.ErrNotDatabase, 0},
		{"meta bucket of another app", boltFile("otherapp.db", schema(bolt.SchemaVersion, "someapp")), nil, bolt.ErrNotDatabase, 0},
		{"newer schema", boltFile("newer.db", schema(bolt.SchemaVersion+1, "idemrun")), nil, bolt.ErrNewerSchema, 0},
		{"missing, must exist", filepath.Join(dir, "missing.db"), &bolt.Options{MustExist: true}, bolt.ErrNoDatabase, 0},
		{"missing, read-only", filepath.Join(dir, "missing2.db"), &bolt.Options{ReadOnly: true}, bolt.ErrNoDatabase, 0},
		{"empty, must exist", write("empty.db", nil), &bolt.Options{MustExist: true}, bolt.ErrNotDatabase, bolt.FileEmpty},
		{"empty, read-only", write("empty2.db", nil), &bolt.Options{ReadOnly: true}, bolt.ErrNotDatabase, bolt.FileEmpty},
		{"empty bbolt file, must exist", boltFile("emptybolt.db", func(*bbolt.Tx) error { return nil }), &bolt.Options{MustExist: true}, bolt.ErrNotDatabase, bolt.FileEmpty},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.path)
			start := time.Now()
			db, err := bolt.Open(tc.path, tc.opts)
			took := time.Since(start)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%s) = nil error; want %v", tc.name, tc.want)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("Open(%s) err = %v; want errors.Is %v, naming the path", tc.name, err, tc.want)
			}
			fe, ok := errors.AsType[*bolt.FileError](err)
			switch {
			case tc.problem == 0 && ok:
				t.Errorf("Open(%s) err = %v; a FileError (%s), want none", tc.name, err, fe.Problem)
			case tc.problem != 0 && (!ok || fe.Problem != tc.problem || fe.Path != tc.path):
				t.Errorf("Open(%s) err = %v (FileError %+v); want a FileError, %s, about %s", tc.name, err, fe, tc.problem, tc.path)
			}
			noCLIWords(t, "Open("+tc.name+")", err.Error())
			if took > 3*time.Second {
				t.Errorf("Open(%s) took %v; want an answer within seconds", tc.name, took)
			}
			after, _ := os.ReadFile(tc.path)
			if !bytes.Equal(before, after) {
				t.Errorf("Open(%s) changed the file", tc.name)
			}
			if _, err := os.Stat(tc.path); tc.want == bolt.ErrNoDatabase && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open(%s) created the file", tc.name)
			}
		})
	}
}

// TestOpenLocked relies on flock locks belonging to an open file
// description: a second open of the file, even in this process, conflicts.
func TestOpenLocked(t *testing.T) {
	db, path := newDB(t, nil)
	for _, ro := range []bool{false, true} {
		start := time.Now()
		db2, err := bolt.Open(path, &bolt.Options{LockTimeout: 500 * time.Millisecond, ReadOnly: ro})
		took := time.Since(start)
		if err == nil {
			db2.Close()
			t.Fatalf("second Open (read-only %v) of a held file succeeded; want ErrLocked", ro)
		}
		if !errors.Is(err, bolt.ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Errorf("second Open (read-only %v) err = %v; want ErrLocked naming the path", ro, err)
		}
		if took < 400*time.Millisecond || took > 3*time.Second {
			t.Errorf("second Open (read-only %v) gave up after %v; want about the 500ms lock timeout", ro, took)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	openAt(t, path, &bolt.Options{LockTimeout: 500 * time.Millisecond})
}

func TestReadOnly(t *testing.T) {
	db, path := newDB(t, nil)
	j := storetest.NewJob("ro", storetest.T0())
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, path, &bolt.Options{ReadOnly: true})
	if got, err := ro.Get(j.ID); err != nil || got.Key != "ro" {
		t.Errorf("read-only Get = %v, %v; want the job", got, err)
	}
	if _, err := ro.Enqueue(ctx, storetest.NewJob("other", storetest.T0())); err == nil {
		t.Errorf("read-only Enqueue succeeded; want a refusal")
	}
}

func TestBackup(t *testing.T) {
	db, _ := newDB(t, nil)
	j := storetest.NewJob("backed-up", storetest.T0())
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := db.Backup(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Backup = %d, %v (buffer %d bytes)", n, err, buf.Len())
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := openAt(t, copyPath, nil)
	if got, err := cp.Get(j.ID); err != nil || !reflect.DeepEqual(got.Request, j.Request) {
		t.Errorf("job in the backup = %+v, %v; want %+v", got, err, j)
	}
}

var errInjected = errors.New("injected storage fault")

func TestCommitHookFailure(t *testing.T) {
	var fail atomic.Bool
	db, _ := newDB(t, &bolt.Options{CommitHook: func(int) error {
		if fail.Load() {
			return errInjected
		}
		return nil
	}})
	now := storetest.T0()
	kept := storetest.NewJob("kept", now)
	if _, err := db.Enqueue(ctx, kept); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %v, %v", cs, err)
	}
	before, _ := db.Get(kept.ID)

	fail.Store(true)
	j := storetest.NewJob("lost", now)
	res, err := db.Enqueue(ctx, j)
	if !errors.Is(err, errInjected) || res.Job != nil {
		t.Errorf("Enqueue under a failing commit = %+v, %v; want the injected error", res, err)
	}
	rs, err := db.EnqueueMany(ctx, []*store.Job{j})
	if !errors.Is(err, errInjected) {
		t.Errorf("EnqueueMany under a failing commit = %+v, %v; want the injected error", rs, err)
	}
	if _, err := db.Finish(ctx, kept.ID, cs[0].Fence, func(j *store.Job) error {
		j.State = store.StateSucceeded
		return nil
	}); !errors.Is(err, errInjected) {
		t.Errorf("Finish under a failing commit: err = %v; want the injected error", err)
	}
	if n, _, err := db.Sweep(ctx, now.Add(time.Hour), now.Add(time.Hour), 10); !errors.Is(err, errInjected) {
		t.Errorf("Sweep under a failing commit = %d, %v; want the injected error", n, err)
	}
	fail.Store(false)

	if _, err := db.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(failed enqueue) err = %v; want ErrNotFound", err)
	}
	if _, err := db.GetByKey("lost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey(failed enqueue) err = %v; want ErrNotFound", err)
	}
	if after, _ := db.Get(kept.ID); !reflect.DeepEqual(after, before) {
		t.Errorf("failed Finish changed the job:\n got  %+v\n want %+v", after, before)
	}
	if st, _ := db.Stats(); st[store.StatePending] != 0 || st[store.StateRunning] != 1 {
		t.Errorf("Stats = %v; want 1 running only", st)
	}
	if res, err := db.Enqueue(ctx, j); err != nil || res.Existing {
		t.Errorf("Enqueue once commits work again = %+v, %v; want a new job", res, err)
	}
}

// TestCommitHookBatchRetry fails the first commit that holds more than one
// operation: each operation of that batch must then run alone and be
// acknowledged.
func TestCommitHookBatchRetry(t *testing.T) {
	const (
		n      = 32
		rounds = 10
	)
	var (
		mu       sync.Mutex
		calls    []int
		failedAt = -1
		gate     chan struct{} // while non-nil, the next commit waits for it to close
		entered  = make(chan struct{}, 1)
	)
	hook := func(ops int) error {
		mu.Lock()
		g := gate
		gate = nil
		mu.Unlock()
		if g != nil {
			entered <- struct{}{}
			<-g
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, ops)
		if ops > 1 && failedAt < 0 {
			failedAt = len(calls) - 1
			return errInjected
		}
		return nil
	}
	db, _ := newDB(t, &bolt.Options{CommitHook: hook})
	now := storetest.T0()
	var all []*store.Job
	for round := range rounds {
		// Hold the writer inside a commit while n enqueues queue up behind it.
		g := make(chan struct{})
		mu.Lock()
		gate = g
		mu.Unlock()
		blocker := storetest.NewJob(fmt.Sprintf("blocker-%d", round), now)
		all = append(all, blocker)
		blocked := make(chan error, 1)
		go func() { _, err := db.Enqueue(ctx, blocker); blocked <- err }()
		<-entered

		errs := make(chan error, n)
		var ready sync.WaitGroup
		for i := range n {
			j := storetest.NewJob(fmt.Sprintf("r%d-%d", round, i), now)
			all = append(all, j)
			ready.Add(1)
			go func() {
				ready.Done()
				res, err := db.Enqueue(ctx, j)
				if err == nil && (res.Existing || res.Job.ID != j.ID) {
					err = fmt.Errorf("enqueue of %s acknowledged as %+v", j.Key, res)
				}
				errs <- err
			}()
		}
		ready.Wait()
		close(g)
		if err := <-blocked; err != nil {
			t.Fatalf("blocker: %v", err)
		}
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("Enqueue: %v", err)
			}
		}
		mu.Lock()
		done := failedAt >= 0
		mu.Unlock()
		if done {
			break
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if failedAt < 0 {
		t.Fatalf("no commit held more than one operation in %d rounds (commits: %v)", rounds, calls)
	}
	size := calls[failedAt]
	if len(calls) < failedAt+1+size {
		t.Fatalf("commits %v: the failed batch of %d was not re-run", calls, size)
	}
	for i, ops := range calls[failedAt+1 : failedAt+1+size] {
		if ops != 1 {
			t.Errorf("commit %d after the failed batch held %d operations; want each of its %d operations alone (commits: %v)", i, ops, size, calls)
		}
	}
	for _, j := range all {
		if got, err := db.Get(j.ID); err != nil || got.Key != j.Key {
			t.Errorf("Get(%s) = %v, %v; want the acknowledged job", j.Key, got, err)
		}
	}
}

func TestGroupCommit(t *testing.T) {
	const (
		workers = 64
		each    = 100
	)
	db, _ := newDB(t, nil)
	now := storetest.T0()
	commits0, ops0 := db.Counters()
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range each {
				if _, err := db.Enqueue(ctx, storetest.NewJob(fmt.Sprintf("g-%d-%d", w, i), now)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	commits1, ops1 := db.Counters()
	commits, ops := commits1-commits0, ops1-ops0
	t.Logf("%d operations in %d commits (%.1f per commit)", ops, commits, float64(ops)/float64(commits))
	if ops != workers*each {
		t.Errorf("Counters: %d operations acknowledged; want %d", ops, workers*each)
	}
	if commits >= ops {
		t.Errorf("Counters: %d commits for %d operations; want operations grouped into fewer commits", commits, ops)
	}
	if st, _ := db.Stats(); st[store.StatePending] != workers*each {
		t.Errorf("Stats = %v; want %d pending", st, workers*each)
	}
	page, err := db.List(store.ListFilter{Limit: store.MaxListLimit})
	if err != nil || len(page.Jobs) != workers*each {
		t.Errorf("List = %d jobs, %v; want %d", len(page.Jobs), err, workers*each)
	}
}
