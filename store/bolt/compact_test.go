package bolt_test

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// seedCompactable fills path with n succeeded jobs, sweeps all but keep of
// them (their keys stay reserved), adds one pending job, and closes the
// store. It returns the ids of
// the jobs left.
func seedCompactable(t *testing.T, path string, n, keep int) []string {
	t.Helper()
	db, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := storetest.T0()
	old := now.Add(-30 * 24 * time.Hour)
	var jobs []*store.Job
	for i := 0; i < n; i++ {
		j := storetest.NewJob("seed-"+strconv.Itoa(i), old)
		j.State, j.Attempts = store.StateSucceeded, 1
		j.Request.Body = []byte(strings.Repeat("x", 400))
		j.CreatedAt, j.UpdatedAt, j.NextRunAt = old, old, old
		if i < keep {
			j.UpdatedAt = now
		}
		jobs = append(jobs, j)
		if len(jobs) == 1000 || i == n-1 {
			if err := db.Seed(ctx, jobs); err != nil {
				t.Fatal(err)
			}
			jobs = jobs[:0]
		}
	}
	for {
		k, _, err := db.Sweep(ctx, now.Add(-time.Hour), old.Add(-time.Hour), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	p := storetest.NewJob("pending", now)
	if _, err := db.Enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	page, err := db.List(store.ListFilter{Limit: keep + 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range page.Jobs {
		ids = append(ids, j.ID)
	}
	if len(ids) != keep+1 {
		t.Fatalf("after the sweep %d jobs are left; want %d", len(ids), keep+1)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestCompactShrinksAndKeepsEveryJob(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	ids := seedCompactable(t, path, 6000, 50)

	db := openAt(t, path, &bolt.Options{ReadOnly: true})
	before := map[string]*store.Job{}
	for _, id := range ids {
		j, err := db.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = j
	}
	stBefore, _ := db.Stats()
	db.Close()
	fi, _ := os.Stat(path)

	res, err := bolt.Compact(path, nil)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	after, _ := os.Stat(path)
	if res.BytesBefore != fi.Size() || res.BytesAfter != after.Size() {
		t.Errorf("result sizes %d → %d; the file was %d → %d", res.BytesBefore, res.BytesAfter, fi.Size(), after.Size())
	}
	if after.Size()*4 > fi.Size() {
		t.Errorf("file %d → %d bytes after sweeping 5,950 of 6,051 jobs; want it at least 4 times smaller", fi.Size(), after.Size())
	}
	if res.FreePagesBefore == 0 || res.Jobs != len(ids) {
		t.Errorf("result = %+v; want free pages before > 0 and %d jobs", res, len(ids))
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy is still there: %v", err)
	}

	db = openAt(t, path, nil) // Check runs when the test ends
	for id, want := range before {
		got, err := db.Get(id)
		if err != nil {
			t.Fatalf("Get(%s) after compact: %v", id, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("job %s changed by compact:\n got  %+v\n want %+v", id, got, want)
		}
	}
	if st, _ := db.Stats(); !reflect.DeepEqual(st, stBefore) {
		t.Errorf("Stats after compact = %v; want %v", st, stBefore)
	}
	// A swept job's key is still reserved after compact.
	if _, err := db.Enqueue(ctx, storetest.NewJob("seed-5000", storetest.T0())); !errors.Is(err, store.ErrKeyConflict) {
		t.Errorf("enqueue under a swept job's key after compact: %v; want ErrKeyConflict", err)
	}
	// The store works on: a claim of the pending job.
	cl, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: storetest.T0().Add(time.Minute), Limit: 10})
	if err != nil || len(cl) != 1 {
		t.Errorf("ClaimDue after compact = %d claims, %v; want the pending job", len(cl), err)
	}
}

func TestCompactRefusesAnOpenDatabase(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	seedCompactable(t, path, 100, 10)
	holder := openAt(t, path, nil)
	fi, _ := os.Stat(path)
	_, err := bolt.Compact(path, &bolt.Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, bolt.ErrLocked) {
		t.Fatalf("Compact of a held file: %v; want ErrLocked", err)
	}
	now, _ := os.Stat(path)
	if !os.SameFile(fi, now) || now.Size() != fi.Size() {
		t.Error("Compact of a held file changed it")
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused compact left a copy: %v", err)
	}
	if _, err := holder.Stats(); err != nil {
		t.Error(err)
	}
}

func TestCompactRefusesALeftoverCopy(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	seedCompactable(t, path, 100, 10)
	if err := os.WriteFile(path+".compact", []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	_, err := bolt.Compact(path, nil)
	if err == nil || !strings.Contains(err.Error(), path+".compact exists") {
		t.Fatalf("Compact with a leftover copy: %v; want it named", err)
	}
	if now, _ := os.Stat(path); !os.SameFile(fi, now) {
		t.Error("the database was replaced")
	}
	if b, _ := os.ReadFile(path + ".compact"); string(b) != "half" {
		t.Error("the leftover copy was touched; it is the operator's to look at")
	}
	if _, err := bolt.Compact(path, &bolt.Options{MustExist: true}); err == nil {
		t.Error("second Compact with the leftover still there succeeded")
	}
}

func TestCompactMissingFile(t *testing.T) {
	path := t.TempDir() + "/none.db"
	if _, err := bolt.Compact(path, nil); !errors.Is(err, bolt.ErrNoDatabase) {
		t.Fatalf("Compact of a missing file: %v; want ErrNoDatabase", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Error("Compact created the database")
	}
}

// An Open that waits for the lock while Compact runs must end up on the
// compacted file, not on the replaced one: a job written through it must
// be there when the file is opened again.
func TestOpenDuringCompactUsesTheNewFile(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	seedCompactable(t, path, 200, 10)
	type opened struct {
		db  *bolt.DB
		err error
	}
	got := make(chan opened, 1)
	started := make(chan struct{})
	beforeRename := func() {
		go func() {
			close(started)
			db, err := bolt.Open(path, &bolt.Options{LockTimeout: 10 * time.Second})
			got <- opened{db, err}
		}()
		<-started
		// Give the open time to reach the lock, which Compact holds.
		time.Sleep(200 * time.Millisecond)
		select {
		case o := <-got:
			t.Errorf("Open returned while Compact held the lock: %v", o.err)
			got <- o
		default:
		}
	}
	if _, err := bolt.Compact(path, &bolt.Options{CompactBeforeRename: beforeRename}); err != nil {
		t.Fatal(err)
	}
	var o opened
	select {
	case o = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("Open did not return after Compact")
	}
	if o.err != nil {
		t.Fatalf("Open during compact: %v", o.err)
	}
	j := storetest.NewJob("after-compact", storetest.T0())
	if _, err := o.db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := o.db.Close(); err != nil {
		t.Fatal(err)
	}
	db := openAt(t, path, nil)
	if _, err := db.Get(j.ID); err != nil {
		t.Fatalf("the job written by the open that waited is gone: %v (it went to the replaced file)", err)
	}
}
