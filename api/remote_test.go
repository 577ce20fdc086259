package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

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

// EnqueueMany through a runner's admin socket answers per item, as the
// in-process Client does: an invalid job is refused alone and the valid
// ones around it are stored.
func TestRemoteEnqueueManyPerItem(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)

	batch := func(prefix string) []api.ManyItem {
		return []api.ManyItem{
			{Request: api.Request{Method: "POST", URL: "http://127.0.0.1:9/pay", Body: []byte("1")}, Options: api.EnqueueOptions{Key: prefix + "-a"}},
			{Request: api.Request{Method: "POST", URL: "ftp://127.0.0.1/x"}, Options: api.EnqueueOptions{Key: prefix + "-b"}},
			{Request: api.Request{Method: "POST", URL: "http://127.0.0.1:9/pay", Body: []byte("3")}, Options: api.EnqueueOptions{Key: prefix + "-c"}},
		}
	}
	for _, s := range []struct {
		name string
		svc  *api.Client
	}{{"client", c}, {"remote", rem}} {
		res, err := s.svc.EnqueueMany(ctx, batch(s.name))
		if err != nil {
			t.Errorf("%s: EnqueueMany = %v; want per-item results", s.name, err)
			continue
		}
		if len(res) != 3 || res[0].Err != nil || res[2].Err != nil || !errors.Is(res[1].Err, api.ErrInvalid) {
			t.Errorf("%s: results %+v; want item 1 refused as invalid, items 0 and 2 stored", s.name, res)
			continue
		}
		for _, k := range []string{"-a", "-c"} {
			if _, err := c.GetByKey(ctx, s.name+k); err != nil {
				t.Errorf("%s: job %s%s not stored: %v", s.name, s.name, k, err)
			}
		}
		if _, err := c.GetByKey(ctx, s.name+"-b"); err == nil {
			t.Errorf("%s: the invalid job was stored", s.name)
		}
	}
	// Only invalid items: no request to the runner, every item refused.
	res, err := rem.EnqueueMany(ctx, batch("only")[1:2])
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, api.ErrInvalid) {
		t.Errorf("remote, one invalid item: %+v, %v", res, err)
	}
}

// Enqueue through the admin socket must refuse a header
// value that is not valid UTF-8, as Client.Enqueue does: JSON replaces
// such bytes with U+FFFD on the way, so the runner stores, and would send,
// other bytes than the caller enqueued (P2).
func TestRemoteEnqueueRefusesNonUTF8(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	req := api.Request{Method: "POST", URL: "http://127.0.0.1:9/pay",
		Header: []api.Header{{Name: "X-Note", Value: "caf\xe9"}}, Body: []byte("{}")}
	o := api.EnqueueOptions{Key: "utf8-remote"}

	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "utf8-local"}); err == nil {
		t.Fatal("Client.Enqueue accepted a non-UTF-8 header value (expected a refusal)")
	}
	if _, err := rem.Enqueue(ctx, req, o); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Enqueue through the socket of header value %q: err %v, want a refusal naming UTF-8", "caf\xe9", err)
	}
	// EnqueueMany refuses the item, not the call (as Client.EnqueueMany does).
	res, err := rem.EnqueueMany(ctx, []api.ManyItem{{Request: req, Options: api.EnqueueOptions{Key: "utf8-many"}}})
	if err != nil || len(res) != 1 || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "UTF-8") || !errors.Is(res[0].Err, api.ErrInvalid) {
		t.Errorf("EnqueueMany through the socket of header value %q: results %+v, err %v; want the item refused as invalid, naming UTF-8", "caf\xe9", res, err)
	}
	for _, k := range []string{"utf8-remote", "utf8-many"} {
		if _, err := c.GetByKey(ctx, k); err == nil {
			t.Errorf("a refused enqueue stored job %s", k)
		}
	}
}

// socketPair opens a store and serves its admin API on the unix socket
// beside it, as a runner does, and returns the store's Client and a Client
// dialed through the socket. Both are closed when the test ends.
func socketPair(t *testing.T) (*api.Client, *api.Client) {
	t.Helper()
	return socketPairWith(t, api.Options{Warn: io.Discard})
}

// socketPairWith is socketPair with the socket client opened with o.
func socketPairWith(t *testing.T, o api.Options) (*api.Client, *api.Client) {
	t.Helper()
	// A short directory: the socket path must fit a unix socket address.
	dir, err := os.MkdirTemp("", "rv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	db := filepath.Join(dir, "r.db")
	c, err := api.Open(db, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ln, err := net.Listen("unix", api.SocketPath(db))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(api.SocketPath(db), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: admin.Handler(c, admin.Options{})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	rem, err := api.DialSocket(db, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rem.Close() })
	return c, rem
}

// DialTCP sends its bearer token to the address given and nowhere else:
// not through $HTTP_PROXY, which http.DefaultTransport would follow.
func TestDialTCPIgnoresTheProxyEnvironment(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var proxied atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			proxied.Add(1)
			c.Close()
		}
	}()
	t.Setenv("HTTP_PROXY", "http://"+ln.Addr().String())
	t.Setenv("http_proxy", "http://"+ln.Addr().String())
	if _, err := api.DialTCP("admin.idemrun.invalid:8080", "s3cr3t-token", nil); err == nil {
		t.Fatal("DialTCP to a name that does not resolve succeeded")
	}
	if n := proxied.Load(); n != 0 {
		t.Errorf("the proxy saw %d connections carrying the admin token; want none", n)
	}
}

// Sensitive names given to a client that works through a runner are not
// recorded by the runner, but this client hides them in every view it
// returns: header values, URL parameters, and the text that quotes them.
func TestSocketClientRedactsItsOwnSensitiveNames(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPairWith(t, api.Options{Warn: io.Discard, SensitiveHeaders: []string{"X-Foo-Blob"}, SensitiveParams: []string{"customsig"}})
	res, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay?customsig=PARAMSECRET", Header: []api.Header{{Name: "X-Foo-Blob", Value: "HEADERSECRET"}}},
		api.EnqueueOptions{Key: "names-through-runner"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, res.Job.ID, "t", "note quoting HEADERSECRET"); err != nil {
		t.Fatal(err)
	}
	j, err := rem.Get(ctx, "names-through-runner")
	if err != nil {
		t.Fatal(err)
	}
	page, err := rem.List(ctx, api.ListFilter{})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("List = %d jobs, %v", len(page.Jobs), err)
	}
	for what, v := range map[string]*api.Job{"Get": j, "List": page.Jobs[0]} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "HEADERSECRET") || strings.Contains(string(b), "PARAMSECRET") {
			t.Errorf("%s through the runner shows a value of a name this client marked sensitive:\n%s", what, b)
		}
	}
	if len(j.Headers) != 1 || j.Headers[0].Value == "HEADERSECRET" || !strings.Contains(j.URL, "customsig=") {
		t.Errorf("view: headers %v, url %s; want the header kept with its value hidden, the parameter named", j.Headers, j.URL)
	}
}

// GetByKey through a runner finds the job holding the key even when the
// key is another job's id (a follow-up keyed by the original), as it does
// on the file.
func TestSocketGetByKeyWhenTheKeyIsAnotherJobsID(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	a, err := c.Enqueue(ctx, api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{Key: "original"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Enqueue(ctx, api.Request{URL: apitest.HostileURL + "/follow-up"}, api.EnqueueOptions{Key: a.Job.ID})
	if err != nil {
		t.Fatal(err)
	}
	for name, cl := range map[string]*api.Client{"file": c, "socket": rem} {
		j, err := cl.GetByKey(ctx, a.Job.ID)
		if err != nil || j.ID != b.Job.ID {
			t.Errorf("%s: GetByKey(%s) = %v, %v; want job %s, which holds that key", name, a.Job.ID, j, err, b.Job.ID)
		}
	}
}
