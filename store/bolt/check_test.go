package bolt

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
)

// TestCheckFindsDamage damages a file behind the store's back and expects
// Check to name every problem, so the Check run after each test is worth
// something.
func TestCheckFindsDamage(t *testing.T) {
	path := t.TempDir() + "/idemrun.db"
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids []string
	for _, k := range []string{"a", "b", "c"} {
		j := &store.Job{ID: store.NewID(), Key: k, Fingerprint: "fp", State: store.StatePending, CreatedAt: now, UpdatedAt: now, NextRunAt: now}
		if _, err := db.Enqueue(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if rep, err := db.Check(); err != nil || !rep.OK() || rep.Jobs != 3 {
		t.Fatalf("Check of a sound file = %+v, %v; want 3 jobs, no problems", rep, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	bdb, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		b := bucketsOf(tx)
		if err := b.meta.Put(counterKey(store.StateFailed), []byte{0, 0, 0, 0, 0, 0, 0, 7}); err != nil {
			return err
		}
		a, _ := uuid.Parse(ids[0])
		j, err := b.load(a[:])
		if err != nil {
			return err
		}
		if err := b.index.Delete(indexKeyOf(j)); err != nil {
			return err
		}
		ghost := uuid.New()
		if err := b.keys.Put([]byte("ghost"), ghost[:]); err != nil {
			return err
		}
		// A second key pointing at job b, whose own key is "b".
		bid, _ := uuid.Parse(ids[1])
		if err := b.keys.Put([]byte("stray"), bid[:]); err != nil {
			return err
		}
		c, _ := uuid.Parse(ids[2])
		return b.jobs.Put(c[:], []byte("\x01{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Check()
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	all := strings.Join(rep.Problems, "\n")
	for _, want := range []string{
		"counter failed = 7",
		"index entry missing",
		`key "ghost" maps to missing job`,
		`key "stray" maps to job`, // … whose key is "b"
		"corrupt job record",
		"index entry", // the damaged record's entry has no decodable job
	} {
		if !strings.Contains(all, want) {
			t.Errorf("Check problems:\n%s\nwant one mentioning %q", all, want)
		}
	}
	if rep.OK() || rep.Jobs != 3 {
		t.Errorf("Check = %d jobs, OK %v; want 3 jobs, not OK", rep.Jobs, rep.OK())
	}
}
