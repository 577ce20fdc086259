package api_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// A client through a runner's socket does what one on the file does:
// EnqueueOptions.RunAt ("delays the first attempt") holds through
// the admin API too (the wire format carries run_at).
func TestRemoteEnqueueKeepsRunAt(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	at := time.Now().Add(30 * time.Minute).UTC()
	req := api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("{}")}
	o := api.EnqueueOptions{Deadline: time.Hour, RunAt: at}
	for _, s := range []struct {
		name string
		svc  *api.Client
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

// Get or steer of an empty id or key through the socket answers as on
// the file, store.ErrNotFound, instead of sending a path that names the
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

// Open on a file a runner holds works through the runner's socket at
// once, instead of failing when the file's lock is not given up; what
// needs the store itself says so.
func TestOpenHeldFileGoesThroughSocket(t *testing.T) {
	ctx := context.Background()
	c, _ := socketPair(t)
	path := c.Store().(interface{ Location() string }).Location()
	start := time.Now()
	held, err := api.Open(path, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatalf("Open of a held file: %v", err)
	}
	defer held.Close()
	if took := time.Since(start); took > time.Second || !held.Remote() {
		t.Errorf("Open of a held file: took %s, remote %v; want a client through the socket at once", took, held.Remote())
	}
	res, err := held.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay"}, api.EnqueueOptions{Key: "held-1"})
	if err != nil {
		t.Fatalf("Enqueue through the socket: %v", err)
	}
	if j, err := c.Get(ctx, "held-1"); err != nil || j.ID != res.Job.ID {
		t.Errorf("the job enqueued through the socket: %v %v", j, err)
	}
	if _, err := held.Check(ctx); !errors.Is(err, api.ErrNotOffered) {
		t.Errorf("Check through the socket: %v, want ErrNotOffered", err)
	}
	if _, err := held.NewRunner(runner.Config{}); !errors.Is(err, api.ErrNotOffered) {
		t.Errorf("NewRunner through the socket: %v, want ErrNotOffered", err)
	}
	if _, err := api.Open(path, &api.Options{Direct: true, LockTimeout: 50 * time.Millisecond, Warn: io.Discard}); !errors.Is(err, api.ErrLocked) {
		t.Errorf("Open Direct of a held file: %v, want ErrLocked", err)
	}
}
