package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/internal/ui"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
)

// TestMain starts a throwaway Postgres server for the tests on the
// Postgres backend.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testToken is the admin token of the fixtures' dashboards.
const testToken = "ui-test-token-7f3a9c2e81d64b05a9e3c1f27d8b46e0"

// Hostile texts: a job carries them in its body, a header and the URL, and
// its target answers with them.
const (
	hostileBody   = `{"memo":"<script>document.title='pwned-body'</script><img src=x onerror=\"document.title='pwned-img'\">"}`
	hostileHeader = `<img src=x onerror="document.title='pwned-header'">`
	hostileAnswer = `<script>document.title='pwned-answer'</script><img src=x onerror="document.title='pwned-answer-img'">`
)

// fixture is a store with jobs in every interesting state, worked by a
// real runner against a loopback target, and the dashboard served for it
// on TCP with a token, as idemrun run --admin serves it.
type fixture struct {
	c   *api.Client
	url string // the dashboard server's base URL
	// Job ids by what happened to them.
	ok, rejected, attention []string
	otherFailed             string // failed at another host
	hostile, later          string
	targetHost              string // host:port of the jobs' target
}

// backends are the stores the dashboard is tested on.
var backends = []string{"bolt", "postgres"}

// openBackend opens a client on a fresh bbolt file or Postgres schema.
func openBackend(t *testing.T, backend string) *api.Client {
	t.Helper()
	var c *api.Client
	var err error
	switch backend {
	case "bolt":
		c, err = api.Open(filepath.Join(t.TempDir(), "ui.db"), &api.Options{Warn: io.Discard})
	case "postgres":
		url, schema := pgtest.Schema(t)
		opts := &api.Options{Postgres: &postgres.Options{Schema: schema}, Warn: io.Discard}
		if err := api.Migrate(context.Background(), url, opts); err != nil {
			t.Fatal(err)
		}
		c, err = api.Open(url, opts)
	}
	if err != nil {
		t.Fatalf("open %s: %v", backend, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// target is the loopback API the fixture's jobs go to: /ok creates,
// /reject refuses with a hostile answer (the job fails), /boom answers
// 500, which may have taken effect (with no status URL the job needs a
// person).
func target(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ok", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"pay_1","status":"succeeded"}`)
	})
	mux.HandleFunc("POST /reject", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, hostileAnswer)
	})
	mux.HandleFunc("POST /boom", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"internal"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newFixture(t *testing.T, backend string) *fixture {
	t.Helper()
	ctx := context.Background()
	c := openBackend(t, backend)
	tgt := target(t)
	f := &fixture{c: c, targetHost: strings.TrimPrefix(tgt.URL, "http://")}
	enqueue := func(path string, hdr []api.Header, body string, o api.EnqueueOptions) string {
		t.Helper()
		res, err := c.Enqueue(ctx, api.Request{URL: tgt.URL + path, Header: hdr, Body: []byte(body)}, o)
		if err != nil {
			t.Fatalf("enqueue %s: %v", path, err)
		}
		return res.Job.ID
	}
	for range 3 {
		f.ok = append(f.ok, enqueue("/ok", nil, `{"amount":100}`, api.EnqueueOptions{}))
	}
	f.rejected = append(f.rejected, enqueue("/reject", nil, `{"amount":5}`, api.EnqueueOptions{}))
	f.hostile = enqueue("/reject?memo=%3Cscript%3Ealert(1)%3C%2Fscript%3E", []api.Header{
		{Name: "Content-Type", Value: "application/json"},
		{Name: "X-Memo", Value: hostileHeader},
		{Name: "Authorization", Value: "Bearer sk_live_do_not_show_me"},
	}, hostileBody, api.EnqueueOptions{Key: "<script>key</script>"})
	f.rejected = append(f.rejected, f.hostile)
	for range 2 {
		f.attention = append(f.attention, enqueue("/boom", nil, `{"amount":7}`, api.EnqueueOptions{}))
	}
	other := target(t)
	res, err := c.Enqueue(ctx, api.Request{URL: other.URL + "/reject", Body: []byte(`{"amount":9}`)}, api.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.otherFailed = res.Job.ID
	r, err := c.NewRunner(runner.Config{Workers: 4, UntilIdle: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := r.Run(rctx); err != nil {
		t.Fatalf("runner: %v", err)
	}
	// After the runner: one job due in an hour, one canceled.
	f.later = enqueue("/ok", nil, `{"amount":1}`, api.EnqueueOptions{RunAt: time.Now().Add(time.Hour), Deadline: 2 * time.Hour})
	cancelID := enqueue("/ok", nil, `{"amount":2}`, api.EnqueueOptions{RunAt: time.Now().Add(time.Hour), Deadline: 2 * time.Hour})
	if _, err := c.Cancel(ctx, cancelID, "test", "not wanted"); err != nil {
		t.Fatal(err)
	}
	f.expectStates(t, map[store.State][]string{store.StateSucceeded: f.ok, store.StateFailed: append([]string{f.otherFailed}, f.rejected...), store.StateNeedsAttention: f.attention})

	dash := ui.Handler(c, ui.Options{Refresh: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: testToken, UI: dash, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// expectStates fails t unless each job is in its state.
func (f *fixture) expectStates(t *testing.T, want map[store.State][]string) {
	t.Helper()
	for st, ids := range want {
		for _, id := range ids {
			j, err := f.c.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != st {
				t.Fatalf("job %s is %s, want %s (reason %q, last error %q)", id, j.State, st, j.Reason, j.LastError)
			}
		}
	}
}
