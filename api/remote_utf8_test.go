package api_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
)

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
	rem, err := api.DialSocket(db, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rem.Close() })
	return c, rem
}
