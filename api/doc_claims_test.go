package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// Options.ReadOnly: "opens the file for reading only (it must exist)".
func TestDocReadOnlyMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing.db")
	c, err := api.Open(p, &api.Options{ReadOnly: true})
	if err == nil {
		c.Close()
		_, serr := os.Stat(p)
		t.Fatalf("ReadOnly Open of a missing file succeeded (file created: %v)", serr == nil)
	}
	if _, serr := os.Stat(p); serr == nil {
		t.Errorf("ReadOnly Open created %s", p)
	}
}

// store.Options.Mode: "the permission of a newly created file".
func TestDocStoreMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.db")
	db, err := bolt.Open(p, &bolt.Options{Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("Mode 0640 gave %04o", fi.Mode().Perm())
	}
}

// EnqueueMany: "Invalid jobs and key conflicts get their own Err" with
// Enqueue's key rules per job.
func TestDocEnqueueManySameKeyInBatch(t *testing.T) {
	c := revOpen(t)
	ctx := context.Background()
	req := func(b string) api.Request { return api.Request{URL: "http://127.0.0.1:1/x", Body: []byte(b)} }
	res, err := c.EnqueueMany(ctx, []api.ManyItem{
		{Request: req("a"), Options: api.EnqueueOptions{Key: "k-1"}},
		{Request: req("a"), Options: api.EnqueueOptions{Key: "k-1"}},
		{Request: req("b"), Options: api.EnqueueOptions{Key: "k-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || !res[1].Existing || res[1].Job.ID != res[0].Job.ID {
		t.Errorf("same key same request twice in a batch: %+v %+v", res[0], res[1])
	}
	if !errors.Is(res[2].Err, store.ErrKeyConflict) {
		t.Errorf("same key other request in a batch: %+v", res[2])
	}
}

// A Client on the file and one through a runner's TCP admin API do the
// same operations. ListFilter.Limit:
// "Defaults to 100; at most 10,000."
func TestDocRemoteListLimitParity(t *testing.T) {
	c := revOpen(t)
	for range 3 {
		revEnq(t, c, time.Time{})
	}
	tok := "0123456789abcdef0123"
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: tok}))
	defer srv.Close()
	rem, err := api.DialTCP(strings.TrimPrefix(srv.URL, "http://"), tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rem.Close()
	ctx := context.Background()
	for _, lim := range []int{-1} {
		_, lerr := c.List(ctx, api.ListFilter{Limit: lim})
		rp, rerr := rem.List(ctx, api.ListFilter{Limit: lim})
		if (lerr == nil) != (rerr == nil) {
			t.Errorf("Limit %d: Client err=%v; Remote err=%v (%d jobs)", lim, lerr, rerr, len(rp.Jobs))
		}
	}
	// Oldest without States
	_, lerr := c.List(ctx, api.ListFilter{Oldest: true})
	_, rerr := rem.List(ctx, api.ListFilter{Oldest: true})
	if (lerr == nil) != (rerr == nil) {
		t.Errorf("Oldest without states: Client %v, Remote %v", lerr, rerr)
	}
	ls, _ := c.Stats(ctx)
	rs, _ := rem.Stats(ctx)
	if len(ls) != len(rs) {
		t.Errorf("stats differ %v %v", ls, rs)
	}
}

// Request.Header: "Idempotency-Key is set by idemrun from the job's key."
func TestDocUserIdempotencyKeyHeader(t *testing.T) {
	c := revOpen(t)
	_, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:1/x", Header: []api.Header{{Name: "Idempotency-Key", Value: "mine"}}}, api.EnqueueOptions{Key: "theirs"})
	t.Logf("user Idempotency-Key header: err=%v", err)
}
