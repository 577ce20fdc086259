package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// outbox is a migrated idemrun schema with an orders table beside it, a
// client on it, and the application's own pool.
type outbox struct {
	client *api.Client
	app    *pgxpool.Pool
	orders string // the orders table, schema-qualified
}

func newOutbox(t *testing.T) *outbox {
	t.Helper()
	ctx := context.Background()
	url, schema := pgtest.Schema(t)
	opts := &api.Options{Postgres: &postgres.Options{Schema: schema}}
	if err := api.Migrate(ctx, url, opts); err != nil {
		t.Fatal(err)
	}
	c, err := api.Open(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	app, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := app.Exec(ctx, "CREATE TABLE "+orders+" (id text PRIMARY KEY, amount int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return &outbox{client: c, app: app, orders: orders}
}

// placeOrder writes an order and its payment job in one transaction of
// the application's pool, and commits it unless rollback is set.
func (o *outbox) placeOrder(t *testing.T, id, target string, body string, rollback bool) (api.EnqueueResult, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := o.app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO "+o.orders+" (id, amount) VALUES ($1, 1000) ON CONFLICT DO NOTHING", id); err != nil {
		t.Fatal(err)
	}
	res, err := o.client.EnqueueTx(ctx, tx, api.Request{Method: "POST", URL: target, Body: []byte(body)}, api.EnqueueOptions{Key: "pay-" + id})
	if rollback {
		return res, err
	}
	if cerr := tx.Commit(ctx); cerr != nil {
		t.Fatalf("commit: %v", cerr)
	}
	return res, err
}

func (o *outbox) orderExists(t *testing.T, id string) bool {
	t.Helper()
	var n int
	if err := o.app.QueryRow(context.Background(), "SELECT count(*) FROM "+o.orders+" WHERE id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// The job exists if and only if the application's transaction commits,
// and a committed job is worked once at the target.
func TestEnqueueTx(t *testing.T) {
	o := newOutbox(t)
	ctx := context.Background()
	var creates atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		creates.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)

	res, err := o.placeOrder(t, "o1", srv.URL+"/payments", `{"order":"o1"}`, false)
	if err != nil || res.Existing || res.Job.State != store.StatePending {
		t.Fatalf("committed order: %+v, %v", res, err)
	}
	if _, err := o.client.Get(ctx, "pay-o1"); err != nil {
		t.Errorf("the committed order's job: %v", err)
	}

	if _, err := o.placeOrder(t, "o2", srv.URL+"/payments", `{"order":"o2"}`, true); err != nil {
		t.Fatalf("enqueue in the transaction later rolled back: %v", err)
	}
	if _, err := o.client.Get(ctx, "pay-o2"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("the rolled-back order's job: err %v, want ErrNotFound", err)
	}
	if o.orderExists(t, "o2") {
		t.Errorf("the rolled-back order exists")
	}
	// Its key was never taken: another request may have it.
	if _, err := o.placeOrder(t, "o2", srv.URL+"/payments", `{"order":"o2","again":true}`, false); err != nil {
		t.Errorf("the key of a rolled-back job, used again: %v", err)
	}

	again, err := o.placeOrder(t, "o1", srv.URL+"/payments", `{"order":"o1"}`, false)
	if err != nil || !again.Existing || again.Job.ID != res.Job.ID {
		t.Errorf("the same request under its key: %+v, %v; want existing %s", again, err, res.Job.ID)
	}
	// A conflict is refused, and the transaction still commits the rest.
	ctx2 := context.Background()
	tx, err := o.app.Begin(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.client.EnqueueTx(ctx2, tx, api.Request{Method: "POST", URL: srv.URL + "/payments", Body: []byte(`{"other":1}`)}, api.EnqueueOptions{Key: "pay-o1"}); !errors.Is(err, api.ErrKeyConflict) {
		t.Errorf("another request under a taken key: err %v, want ErrKeyConflict", err)
	}
	if _, err := tx.Exec(ctx2, "INSERT INTO "+o.orders+" (id, amount) VALUES ('o3', 5)"); err != nil {
		t.Fatalf("the transaction after a refused enqueue: %v", err)
	}
	if err := tx.Commit(ctx2); err != nil {
		t.Fatalf("commit after a refused enqueue: %v", err)
	}
	if !o.orderExists(t, "o3") {
		t.Errorf("the order written after a refused enqueue is missing")
	}

	r, err := o.client.NewRunner(exampleRunner())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := r.Run(rctx); err != nil || rctx.Err() != nil {
		t.Fatalf("Run: %v (%v)", err, rctx.Err())
	}
	if n := creates.Load(); n != 2 {
		t.Errorf("target got %d creates, want 2 (orders o1 and o2)", n)
	}
}

// EnqueueTx needs a Postgres database.
func TestEnqueueTxOnAFile(t *testing.T) {
	c, err := api.Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EnqueueTx(context.Background(), nil, api.Request{Method: "POST", URL: "http://127.0.0.1:9/x"}, api.EnqueueOptions{}); !errors.Is(err, api.ErrNotOffered) {
		t.Errorf("EnqueueTx on a bbolt file: err %v, want ErrNotOffered", err)
	}
}
