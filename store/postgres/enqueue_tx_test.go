package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/storetest"
)

// appPool is an application's own pool on the test server, with a table
// of its own in the schema.
func appPool(t *testing.T, url, schema string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec(t, url, schema, `CREATE TABLE {schema}.orders (id int PRIMARY KEY)`)
	return pool
}

func orders(t *testing.T, pool *pgxpool.Pool, schema string) []int {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT id FROM `+pgx.Identifier{schema, "orders"}.Sanitize()+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestEnqueueTxCommit: a job enqueued in the application's transaction,
// on the application's pool, is invisible until the transaction commits,
// then stored, announced and claimable.
func TestEnqueueTxCommit(t *testing.T) {
	db, u, schema := newStore(t, nil)
	app := appPool(t, u, schema)
	ch := db.Wakeups(ctx)
	if !received(t, ch, 5*time.Second) {
		t.Fatalf("no wakeup once the handle listens")
	}
	now := storetest.T0()
	j := storetest.NewJob("outbox-1", now)
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "orders"}.Sanitize()+` VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	res, err := db.EnqueueTx(ctx, tx, j)
	if err != nil || res.Existing || res.Job.ID != j.ID {
		t.Fatalf("EnqueueTx = %+v, %v; want the job stored", res, err)
	}
	if _, err := db.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get before the commit = %v; want ErrNotFound", err)
	}
	if received(t, ch, 100*time.Millisecond) {
		t.Errorf("a wakeup before the transaction committed")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !received(t, ch, time.Second) {
		t.Errorf("no wakeup within 1 s of the commit")
	}
	if got, err := db.Get(j.ID); err != nil || !storetest.JobsEqual(got, res.Job) {
		t.Errorf("Get after the commit = %+v, %v; want %+v", got, err, res.Job)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 5})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != j.ID {
		t.Errorf("ClaimDue = %v, %v; want the job", cs, err)
	}
	if ids := orders(t, app, schema); len(ids) != 1 {
		t.Errorf("orders %v; want the one committed with the job", ids)
	}
}

// TestEnqueueTxRollback: a job enqueued in a transaction rolled back was
// never stored, and its key is free.
func TestEnqueueTxRollback(t *testing.T) {
	db, u, schema := newStore(t, nil)
	app := appPool(t, u, schema)
	now := storetest.T0()
	j := storetest.NewJob("outbox-rb", now)
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnqueueTx(ctx, tx, j); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetByKey(j.Key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey after the rollback = %v; want ErrNotFound", err)
	}
	other := storetest.NewJob(j.Key, now)
	other.Fingerprint = "another request"
	if res, err := db.Enqueue(ctx, other); err != nil || res.Existing {
		t.Errorf("Enqueue of another request under the key = %+v, %v; want it stored: the key is free", res, err)
	}
}

// TestEnqueueTxConflict: a key conflict inside the application's
// transaction is refused without aborting it; the same request again is
// Existing; the transaction goes on and commits its other rows and jobs.
func TestEnqueueTxConflict(t *testing.T) {
	db, u, schema := newStore(t, nil)
	app := appPool(t, u, schema)
	now := storetest.T0()
	held := storetest.NewJob("outbox-held", now)
	if _, err := db.Enqueue(ctx, held); err != nil {
		t.Fatal(err)
	}
	orderSQL := `INSERT INTO ` + pgx.Identifier{schema, "orders"}.Sanitize() + ` VALUES ($1)`
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, orderSQL, 2); err != nil {
		t.Fatal(err)
	}
	clash := storetest.NewJob(held.Key, now)
	clash.Fingerprint = "another request"
	var kc *store.KeyConflictError
	if _, err := db.EnqueueTx(ctx, tx, clash); !errors.As(err, &kc) || kc.JobID != held.ID {
		t.Fatalf("EnqueueTx of another request under a held key = %v; want a *KeyConflictError naming %s", err, held.ID)
	}
	if res, err := db.EnqueueTx(ctx, tx, storetest.NewJob(held.Key, now)); err != nil || !res.Existing || res.Job.ID != held.ID {
		t.Errorf("EnqueueTx of the same request = %+v, %v; want the held job, Existing", res, err)
	}
	fresh := storetest.NewJob("outbox-fresh", now)
	again := storetest.NewJob("outbox-fresh", now) // the first of a key in a batch is stored
	rs, err := db.EnqueueManyTx(ctx, tx, []*store.Job{fresh, clash, again})
	if err != nil || rs[0].Err != nil || rs[0].Existing || !errors.Is(rs[1].Err, store.ErrKeyConflict) || rs[2].Err != nil || !rs[2].Existing || rs[2].Job.ID != fresh.ID {
		t.Fatalf("EnqueueManyTx = %+v, %v; want fresh stored, the clash refused, the repeat Existing", rs, err)
	}
	// An error of the database inside EnqueueTx (here a lock timeout: an
	// uncommitted transaction holds the key) undoes only its own writes.
	busy, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Rollback(ctx)
	if _, err := db.EnqueueTx(ctx, busy, storetest.NewJob("outbox-busy", now)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnqueueTx(ctx, tx, storetest.NewJob("outbox-busy", now)); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("EnqueueTx of a key an open transaction holds, under a lock timeout = %v; want the timeout", err)
	}
	if err := busy.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, orderSQL, 3); err != nil {
		t.Fatalf("the application's transaction after the refusals: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := orders(t, app, schema); len(ids) != 2 || ids[0] != 2 || ids[1] != 3 {
		t.Errorf("orders %v; want 2 and 3 committed", ids)
	}
	if _, err := db.Get(fresh.ID); err != nil {
		t.Errorf("Get of the job committed with them: %v", err)
	}
	if _, err := db.GetByKey("outbox-busy"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey(outbox-busy) = %v; want ErrNotFound: both of its enqueues were undone", err)
	}
	if got, err := db.GetByKey(held.Key); err != nil || got.ID != held.ID || got.Fingerprint != held.Fingerprint {
		t.Errorf("GetByKey(held) = %+v, %v; want the held job unchanged", got, err)
	}
}
