package bolt

import (
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

func TestLingerFor(t *testing.T) {
	base := 200 * time.Microsecond
	for _, c := range []struct {
		writers   int64
		wantDelay time.Duration
		wantBatch int
	}{
		{0, base, lingerBelow},
		{16, base, lingerBelow},
		{100, base, lingerBelow},
		{200, 400 * time.Microsecond, 50},
		{500, time.Millisecond, 125},
		{5000, time.Millisecond, 1250}, // the writer caps the batch at MaxBatch
	} {
		d, b := lingerFor(base, c.writers)
		if d != c.wantDelay || b != c.wantBatch {
			t.Errorf("lingerFor(200µs, %d) = %s, %d; want %s, %d", c.writers, d, b, c.wantDelay, c.wantBatch)
		}
	}
	// A disabled linger stays disabled; a base above the cap is kept.
	if d, _ := lingerFor(-1, 500); d != -1 {
		t.Errorf("lingerFor(-1, 500) = %s, want -1 (commit at once)", d)
	}
	if d, _ := lingerFor(5*time.Millisecond, 500); d != 5*time.Millisecond {
		t.Errorf("lingerFor(5ms, 500) = %s, want the configured 5ms", d)
	}
}

func TestExpectWritersReleaseOnce(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r1 := db.ExpectWriters(300)
	r2 := db.ExpectWriters(200)
	if got := db.writers.Load(); got != 500 {
		t.Fatalf("writers = %d, want 500", got)
	}
	r1()
	r1() // a second release changes nothing
	if got := db.writers.Load(); got != 200 {
		t.Fatalf("after one release writers = %d, want 200", got)
	}
	r2()
	db.ExpectWriters(0)()
	if got := db.writers.Load(); got != 0 {
		t.Fatalf("after both releases writers = %d, want 0", got)
	}
}

// With many expected writers, a lone write waits the grown linger for
// company before its commit (at least 1 ms for 500 writers), and is
// acknowledged and durable all the same.
func TestExpectWritersLingerApplies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	release := db.ExpectWriters(500)
	start := time.Now()
	if err := db.write(func(tx *bbolt.Tx) error {
		return fatal(tx.Bucket(bucketMeta).Put([]byte("t/lone"), []byte("1")))
	}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Millisecond {
		t.Errorf("a lone write with 500 expected writers was acknowledged after %s; want the 1ms linger first", took)
	}
	release()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_ = ro.view(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get([]byte("t/lone")); string(v) != "1" {
			t.Errorf("after reopen the lingered write reads %q, want \"1\"", v)
		}
		return nil
	})
}

// A short linger yields instead of sleeping: it takes what is queued up to
// the batch size, and with nobody producing it gives up after idleYields
// empty turns, long before its deadline (a timer would fire ~1ms late).
func TestLingerYield(t *testing.T) {
	db := &DB{ops: make(chan *op, 10)}
	for range 5 {
		db.ops <- &op{}
	}
	got := db.lingerYield([]*op{{}}, 4, time.Second)
	if len(got) != 4 || len(db.ops) != 2 {
		t.Fatalf("lingerYield took the batch to %d with %d left queued; want 4 and 2", len(got), len(db.ops))
	}
	start := time.Now()
	got = db.lingerYield(nil, 100, time.Second)
	if took := time.Since(start); took > 500*time.Millisecond || len(got) != 2 {
		t.Errorf("with 2 queued and nobody producing, lingerYield returned %d ops after %s; want 2, well before its 1s deadline", len(got), took)
	}
}
