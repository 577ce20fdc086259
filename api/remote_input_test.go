package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// Remote satisfies Service, so code written against Service may be handed
// either; EnqueueOptions.RunAt ("delays the first attempt") holds through
// the admin API too (the wire format carries run_at).
func TestRemoteEnqueueKeepsRunAt(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	at := time.Now().Add(30 * time.Minute).UTC()
	req := api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("{}")}
	o := api.EnqueueOptions{Deadline: time.Hour, RunAt: at}
	for _, s := range []struct {
		name string
		svc  api.Service
	}{{"client", c}, {"remote", rem}} {
		o.Key = "runat-" + s.name
		res, err := s.svc.Enqueue(ctx, req, o)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d := res.Job.NextRunAt.Sub(at); d < -time.Second || d > time.Second {
			t.Errorf("%s: next_run_at %s, want the RunAt %s", s.name, res.Job.NextRunAt, at)
		}
		many, err := s.svc.EnqueueMany(ctx, []api.ManyItem{{Request: req, Options: api.EnqueueOptions{Key: "runat-many-" + s.name, Deadline: time.Hour, RunAt: at}}})
		if err != nil || many[0].Err != nil {
			t.Fatalf("%s EnqueueMany: %v %v", s.name, err, many)
		}
		if d := many[0].Job.NextRunAt.Sub(at); d < -time.Second || d > time.Second {
			t.Errorf("%s EnqueueMany: next_run_at %s, want the RunAt %s", s.name, many[0].Job.NextRunAt, at)
		}
	}
}

// Get or steer of an empty id or key: the Remote answers as the Client
// does, store.ErrNotFound, instead of sending a path that names the
// collection (a plain-text 404 or a redirect from the mux).
func TestRemoteEmptyIDNotFound(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	if _, err := c.Get(ctx, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("client Get(\"\"): %v", err)
	}
	if _, err := rem.Get(ctx, ""); !errors.Is(err, store.ErrNotFound) && !errors.Is(err, api.ErrInvalid) {
		t.Errorf("remote Get(\"\"): %v; want ErrNotFound (or ErrInvalid), as the Client answers", err)
	}
	if _, err := rem.Cancel(ctx, "", "", ""); !errors.Is(err, store.ErrNotFound) && !errors.Is(err, api.ErrInvalid) {
		t.Errorf("remote Cancel(\"\"): %v; want ErrNotFound (or ErrInvalid), as the Client answers", err)
	}
}

// A cursor is only good for the list it came from: a cursor printed by a
// list of one state, passed to a list of another, is refused instead of
// giving an empty last page.
func TestListCursorOfAnotherStateRefused(t *testing.T) {
	ctx := context.Background()
	c, _ := socketPair(t)
	for i := range 3 {
		if _, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay"}, api.EnqueueOptions{Key: "cur-" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.List(ctx, api.ListFilter{States: []store.State{store.StatePending}, Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %v, next %q", err, p.Next)
	}
	if _, err := c.List(ctx, api.ListFilter{States: []store.State{store.StateFailed}, Limit: 1, Cursor: p.Next}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("a pending list's cursor on a failed list: %v, want ErrInvalid", err)
	}
	if _, err := c.List(ctx, api.ListFilter{States: []store.State{store.StateFailed, store.StatePending}, Limit: 1, Cursor: p.Next}); err != nil {
		t.Errorf("the cursor on a list that includes its state: %v", err)
	}
}
