package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/postgres"
)

// spyStore is a store that records the batches of ManualMany and lets a
// test act between a bulk action's snapshot of ids and its changes.
type spyStore struct {
	store.Store
	mu         sync.Mutex
	afterMatch func() // run once, after the next MatchIDs
	overBound  bool   // MatchIDs reports more jobs than asked for
	batches    []int
}

func (s *spyStore) MatchIDs(f store.ListFilter, max int) ([]string, bool, error) {
	ids, more, err := s.Store.MatchIDs(f, max)
	s.mu.Lock()
	fn := s.afterMatch
	s.afterMatch = nil
	more = more || s.overBound
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
	return ids, more, err
}

func (s *spyStore) ManualMany(ctx context.Context, ids []string, fn store.TransitionFunc) ([]error, error) {
	s.mu.Lock()
	s.batches = append(s.batches, len(ids))
	s.mu.Unlock()
	return s.Store.ManualMany(ctx, ids, fn)
}

// bulkEnv is a client to test bulk actions through (c), the client that
// holds the store (own) and the spy beneath own.
type bulkEnv struct {
	c, own *api.Client
	spy    *spyStore
}

// bulkEnvs makes the three ways a bulk action reaches a store: a bbolt
// file directly, a bbolt file through the admin socket of the process
// that holds it, and Postgres.
func bulkEnvs(t *testing.T) map[string]func(t *testing.T) bulkEnv {
	onBolt := func(t *testing.T) (*api.Client, *spyStore, string) {
		dir, err := os.MkdirTemp("", "bk") // short: a socket path must fit
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path := filepath.Join(dir, "b.db")
		db, err := bolt.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		spy := &spyStore{Store: db}
		own, err := api.New(spy, &api.Options{Warn: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if rep, err := db.Check(); err != nil || !rep.OK() {
				t.Errorf("check: %v %v", err, rep.Problems)
			}
			own.Close()
		})
		return own, spy, path
	}
	return map[string]func(t *testing.T) bulkEnv{
		"bolt": func(t *testing.T) bulkEnv {
			own, spy, _ := onBolt(t)
			return bulkEnv{c: own, own: own, spy: spy}
		},
		"socket": func(t *testing.T) bulkEnv {
			own, spy, path := onBolt(t)
			ln, err := net.Listen("unix", api.SocketPath(path))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(api.SocketPath(path), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: admin.Handler(own, admin.Options{})}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
			rem, err := api.DialSocket(path, &api.Options{Warn: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rem.Close() })
			return bulkEnv{c: rem, own: own, spy: spy}
		},
		"postgres": func(t *testing.T) bulkEnv {
			url, schema := pgtest.Schema(t)
			opts := &api.Options{Postgres: &postgres.Options{Schema: schema}, Warn: io.Discard}
			if err := api.Migrate(context.Background(), url, opts); err != nil {
				t.Fatal(err)
			}
			pg, err := api.Open(url, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pg.Close() })
			spy := &spyStore{Store: pg.Store()}
			own, err := api.New(spy, &api.Options{Warn: io.Discard, Now: time.Now})
			if err != nil {
				t.Fatal(err)
			}
			return bulkEnv{c: own, own: own, spy: spy}
		},
	}
}

// jobAt enqueues a job under key to url and moves it to st through the
// store, as a runner would (failed: rejected; needs_attention: an
// attempt that could not be confirmed). No other job may be pending.
func jobAt(t *testing.T, c *api.Client, key, url string, st store.State) *api.Job {
	t.Helper()
	ctx := context.Background()
	j := apitest.EnqueueOK(t, c, url, key)
	if st == store.StatePending {
		return j
	}
	cs, err := c.Store().ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: time.Now().Add(time.Second), Limit: 1})
	if err != nil || len(cs) != 1 || cs[0].Job.ID != j.ID {
		t.Fatalf("claiming %s: %d claims, %v", key, len(cs), err)
	}
	if _, _, err := c.Store().FinishClaim(ctx, cs[0], func(sj *store.Job) error {
		sj.State, sj.UpdatedAt = st, time.Now()
		sj.Reason = "test: " + string(st)
		sj.MayHaveEffect = st == store.StateNeedsAttention
		return nil
	}, nil); err != nil {
		t.Fatalf("finishing %s: %v", key, err)
	}
	return j
}

func stateOf(t *testing.T, c *api.Client, id string) (store.State, *api.Job) {
	t.Helper()
	j, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return store.State(j.State), j
}

// Bulk on each backend: a dry run counts and changes nothing; the action
// changes exactly the jobs that matched at the call: a job that failed
// after it is untouched, one retried meanwhile is reported unchanged
// with its reason; resolve records the note on each job; batches hold
// at most BulkBatch jobs.
func TestBulk(t *testing.T) {
	for name, mk := range bulkEnvs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := mk(t)
			ctx := context.Background()
			var aFailed, bFailed, attention []*api.Job
			for i := range 6 {
				aFailed = append(aFailed, jobAt(t, env.own, fmt.Sprintf("a-failed-%d", i), "http://a.test/pay", store.StateFailed))
			}
			for i := range 3 {
				bFailed = append(bFailed, jobAt(t, env.own, fmt.Sprintf("b-failed-%d", i), "https://b.test/pay", store.StateFailed))
			}
			for i := range 2 {
				attention = append(attention, jobAt(t, env.own, fmt.Sprintf("a-attn-%d", i), "http://a.test/pay", store.StateNeedsAttention))
			}
			// Pending, but not due yet: the claims of jobAt pass it over.
			pres, err := env.own.Enqueue(ctx, api.Request{URL: "http://a.test/pay"}, api.EnqueueOptions{Key: "a-pending", RunAt: time.Now().Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			pending := pres.Job

			retry := api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StateFailed}, Host: "a.test"}, Action: api.BulkRetry, Note: "a.test is back", DryRun: true}
			before := apitest.Snapshot(t, env.own)
			res, err := env.c.Bulk(ctx, retry)
			if err != nil || res.Matched != 6 || res.Changed != 0 || res.UnchangedCount != 0 {
				t.Fatalf("dry run = %+v, %v; want 6 matched, nothing changed", res, err)
			}
			if after := apitest.Snapshot(t, env.own); after != before {
				t.Fatalf("a dry run changed the store")
			}

			// Between the snapshot and the action: one matched job is
			// retried by someone else, and another a.test job fails.
			var late *api.Job
			env.spy.afterMatch = func() {
				late = jobAt(t, env.own, "a-failed-late", "http://a.test/pay", store.StateFailed)
				if _, err := env.own.Retry(ctx, aFailed[0].ID, "other", "by hand"); err != nil {
					t.Errorf("Retry: %v", err)
				}
			}
			retry.DryRun = false
			retry.Actor = "bulk-tester"
			res, err = env.c.Bulk(ctx, retry)
			if err != nil || res.Matched != 6 || res.Changed != 5 || res.UnchangedCount != 1 || len(res.Unchanged) != 1 {
				t.Fatalf("Bulk(retry) = %+v, %v; want 6 matched, 5 changed, 1 unchanged", res, err)
			}
			if u := res.Unchanged[0]; u.ID != aFailed[0].ID || u.Reason != "state is now pending" {
				t.Errorf("unchanged = %+v; want %s with reason %q", u, aFailed[0].ID, "state is now pending")
			}
			for _, j := range aFailed[1:] {
				st, v := stateOf(t, env.own, j.ID)
				if st != store.StatePending {
					t.Errorf("job %s is %s after the bulk retry; want pending", j.Key, st)
				}
				if ev := v.History[len(v.History)-1]; ev.Kind != store.EventManual || ev.Actor != "bulk-tester" || ev.Note != "a.test is back" {
					t.Errorf("job %s last event %+v; want the bulk retry by bulk-tester with its note", j.Key, ev)
				}
			}
			for _, j := range append(append([]*api.Job{late}, bFailed...), attention...) {
				if st, v := stateOf(t, env.own, j.ID); st == store.StatePending || (len(v.History) > 0 && v.History[len(v.History)-1].Note == "a.test is back") {
					t.Errorf("job %s (%s) was changed by a bulk retry it did not match", j.Key, st)
				}
			}

			// Resolve records the note on each job.
			fn := api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StateNeedsAttention}}, Action: api.BulkResolve, As: store.StateSucceeded, Note: "checked at the provider: paid", Actor: "ops"}
			if res, err := env.c.Bulk(ctx, fn); err != nil || res.Matched != 2 || res.Changed != 2 {
				t.Fatalf("Bulk(resolve) = %+v, %v; want 2 of 2 changed", res, err)
			}
			for _, j := range attention {
				st, v := stateOf(t, env.own, j.ID)
				ev := v.History[len(v.History)-1]
				if st != store.StateSucceeded || ev.Note != "checked at the provider: paid" || ev.Actor != "ops" {
					t.Errorf("job %s is %s, last event %+v; want succeeded with the note by ops", j.Key, st, ev)
				}
			}

			// Cancel in batches: the pending jobs, more than one batch.
			items := make([]api.ManyItem, 2*api.BulkBatch+3)
			for i := range items {
				items[i] = api.ManyItem{Request: api.Request{URL: "http://c.test/x"}, Options: api.EnqueueOptions{Key: fmt.Sprintf("c-%04d", i), RunAt: time.Now().Add(time.Minute)}}
			}
			if _, err := env.own.EnqueueMany(ctx, items); err != nil {
				t.Fatal(err)
			}
			env.spy.mu.Lock()
			env.spy.batches = nil
			env.spy.mu.Unlock()
			res, err = env.c.Bulk(ctx, api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StatePending}, Host: "c.test"}, Action: api.BulkCancel, Note: "c.test is retired"})
			if err != nil || res.Matched != len(items) || res.Changed != len(items) {
				t.Fatalf("Bulk(cancel) = %+v, %v; want %d of %d changed", res, err, len(items), len(items))
			}
			env.spy.mu.Lock()
			batches := slices.Clone(env.spy.batches)
			env.spy.mu.Unlock()
			if !slices.Equal(batches, []int{api.BulkBatch, api.BulkBatch, 3}) {
				t.Errorf("cancel batches = %v; want %d, %d, 3", batches, api.BulkBatch, api.BulkBatch)
			}
			stats, err := env.own.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// pending: the 5 retried and a-failed-0 retried by hand, the
			// job left pending; failed: b.test's 3 and the late one.
			want := api.Stats{"pending": 7, "failed": 4, "succeeded": 2, "canceled": int64(len(items)), "running": 0, "unknown": 0, "needs_attention": 0}
			for k, v := range want {
				if stats[k] != v {
					t.Errorf("Stats[%s] = %d; want %d (all: %v)", k, stats[k], v, stats)
				}
			}
			if st, _ := stateOf(t, env.own, pending.ID); st != store.StatePending {
				t.Errorf("the pending a.test job is %s; want pending (no bulk matched it)", st)
			}

			// A filter that matches more than the bound is refused, and
			// changes nothing.
			env.spy.mu.Lock()
			env.spy.overBound = true
			env.spy.mu.Unlock()
			before = apitest.Snapshot(t, env.own)
			_, err = env.c.Bulk(ctx, api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StateFailed}}, Action: api.BulkRetry, Note: "all"})
			wantInvalid(t, "a bulk over the bound", err, "filter")
			if after := apitest.Snapshot(t, env.own); after != before {
				t.Errorf("a refused bulk changed the store")
			}
		})
	}
}

// Bad bulk requests are refused with an *InvalidError naming the field,
// on the store and through the socket, and change nothing.
func TestBulkInvalid(t *testing.T) {
	envs := bulkEnvs(t)
	for _, name := range []string{"bolt", "socket"} {
		t.Run(name, func(t *testing.T) {
			env := envs[name](t)
			jobAt(t, env.own, "f-1", "http://a.test/pay", store.StateFailed)
			failed := api.ListFilter{States: []api.State{store.StateFailed}}
			now := time.Now()
			for _, c := range []struct {
				name, field string
				r           api.BulkRequest
			}{
				{"no action", "action", api.BulkRequest{Filter: failed, Note: "n"}},
				{"unknown action", "action", api.BulkRequest{Filter: failed, Action: "delete", Note: "n"}},
				{"no state", "state", api.BulkRequest{Action: api.BulkRetry, Note: "n"}},
				{"unknown state", "state", api.BulkRequest{Filter: api.ListFilter{States: []api.State{"broken"}}, Action: api.BulkRetry, Note: "n"}},
				{"state retry cannot change", "state", api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StatePending}}, Action: api.BulkRetry, Note: "n"}},
				{"no note", "note", api.BulkRequest{Filter: failed, Action: api.BulkRetry}},
				{"blank note", "note", api.BulkRequest{Filter: failed, Action: api.BulkRetry, Note: "  "}},
				{"resolve without as", "as", api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StateNeedsAttention}}, Action: api.BulkResolve, Note: "n"}},
				{"resolve as pending", "as", api.BulkRequest{Filter: api.ListFilter{States: []api.State{store.StateNeedsAttention}}, Action: api.BulkResolve, As: store.StatePending, Note: "n"}},
				{"retry with as", "as", api.BulkRequest{Filter: failed, Action: api.BulkRetry, As: store.StateSucceeded, Note: "n"}},
				{"since after until", "until", api.BulkRequest{Filter: api.ListFilter{States: failed.States, Since: now, Until: now.Add(-time.Hour)}, Action: api.BulkRetry, Note: "n"}},
				{"bad host", "host", api.BulkRequest{Filter: api.ListFilter{States: failed.States, Host: "http://a.test/"}, Action: api.BulkRetry, Note: "n"}},
				{"default host", "host", api.BulkRequest{Filter: api.ListFilter{States: failed.States, Host: "*"}, Action: api.BulkRetry, Note: "n"}},
				{"bad id prefix", "id_prefix", api.BulkRequest{Filter: api.ListFilter{States: failed.States, IDPrefix: "xyz"}, Action: api.BulkRetry, Note: "n"}},
			} {
				before := apitest.Snapshot(t, env.own)
				_, err := env.c.Bulk(context.Background(), c.r)
				wantInvalid(t, c.name, err, c.field)
				if after := apitest.Snapshot(t, env.own); after != before {
					t.Errorf("%s: the refused bulk changed the store", c.name)
				}
			}
		})
	}
}

// The list filters give the same pages on the store and through the
// socket; a bad filter is refused naming its field.
func TestListFiltersThroughSocket(t *testing.T) {
	env := bulkEnvs(t)["socket"](t)
	ctx := context.Background()
	var mid time.Time
	for i := range 12 {
		url := []string{"http://a.test/x", "http://b.test:8080/y"}[i%2]
		st := []store.State{store.StateFailed, store.StateNeedsAttention, store.StateSucceeded}[i%3]
		jobAt(t, env.own, fmt.Sprintf("k%d-%02d", i%2, i), url, st)
		if i == 5 {
			mid = time.Now()
		}
	}
	first, err := env.own.List(ctx, api.ListFilter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []api.ListFilter{
		{Host: "a.test"},
		{Host: "B.test:8080"},
		{States: []api.State{store.StateFailed, store.StateSucceeded}, Host: "a.test"},
		{Since: mid},
		{Until: mid, States: []api.State{store.StateNeedsAttention}},
		{KeyPrefix: "k1-"},
		{IDPrefix: first.Jobs[0].ID[:30]},
		{States: []api.State{store.StateFailed, store.StateSucceeded}, Sort: api.ListSortUpdated},
	} {
		for _, limit := range []int{2, 100} {
			f.Limit = limit
			var local, remote []string
			for _, pair := range []struct {
				c   *api.Client
				out *[]string
			}{{env.own, &local}, {env.c, &remote}} {
				g := f
				for range 20 {
					p, err := pair.c.List(ctx, g)
					if err != nil {
						t.Fatalf("List(%+v): %v", g, err)
					}
					for _, j := range p.Jobs {
						*pair.out = append(*pair.out, j.Key)
					}
					if p.Next == "" {
						break
					}
					g.Cursor = p.Next
				}
			}
			if len(local) == 0 || !slices.Equal(local, remote) {
				t.Errorf("List(%+v): on the store %v, through the socket %v; want the same, not empty", f, local, remote)
			}
		}
	}
	for _, c := range []struct {
		field string
		f     api.ListFilter
	}{
		{"host", api.ListFilter{Host: "a.test/x"}},
		{"until", api.ListFilter{Since: mid, Until: mid}},
		{"id_prefix", api.ListFilter{IDPrefix: "g"}},
		{"sort", api.ListFilter{Sort: "random"}},
		{"sort", api.ListFilter{Sort: api.ListSortNextRun, States: []api.State{store.StateFailed}}},
		{"sort", api.ListFilter{Sort: api.ListSortUpdated}},
	} {
		for _, cl := range []*api.Client{env.own, env.c} {
			_, err := cl.List(ctx, c.f)
			wantInvalid(t, fmt.Sprintf("List(%+v)", c.f), err, c.field)
		}
	}
}

// wantInvalid fails unless err is invalid input naming field: an
// *InvalidError on the store, the admin API's invalid_input through it.
func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "invalid "+field+" ") {
		t.Errorf("%s: error %v; want invalid input naming %s", what, err, field)
	}
	if ie, ok := err.(*api.InvalidError); ok && (ie.Field != field || ie.Accepted == "") {
		t.Errorf("%s: %+v; want field %s and what it accepts", what, ie, field)
	}
}
