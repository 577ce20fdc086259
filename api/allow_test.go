package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
)

// A job enqueued without an allowlist (say `idemrun enqueue` with no
// runner) is worked by a runner that has one: its status query goes only
// to an allowed host. Counted at the status server.
func TestStatusQueryKeepsToTheAllowlist(t *testing.T) {
	t.Parallel()
	var queries atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError) // outcome unknown
	}))
	defer target.Close()
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		fmt.Fprint(w, `{"status":"succeeded","secret":"from-a-host-not-on-the-allowlist"}`)
	}))
	defer status.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(status.URL, "http://"))
	path := filepath.Join(t.TempDir(), "allow.db")
	c0, err := api.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c0.Enqueue(context.Background(), api.Request{URL: target.URL + "/pay"},
		api.EnqueueOptions{Key: "k", StatusURL: "http://localhost:" + port + "/s?key={key}"})
	c0.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := api.Open(path, &api.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := exampleRunner()
	cfg.StatusBudget = 2
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := c.GetByKey(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if n := queries.Load(); n != 0 || j.State != "needs_attention" {
		t.Errorf("status server (localhost, not on the allowlist) got %d queries; job %s, want 0 and needs_attention", n, j.State)
	}
}
