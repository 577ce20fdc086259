package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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

// Wait returns once an embedded runner has worked the job, woken by the
// runner's write rather than a poll; at once for a job already settled
// (needs_attention included); and with ctx's error when ctx ends first.
func TestWaitLocal(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()

	na := apitest.NeedsAttention(t, c, "wait-na")
	if j, err := c.Wait(ctx, na.Key); err != nil || j.State != store.StateNeedsAttention {
		t.Fatalf("Wait on a needs_attention job: %v %v", j, err)
	}

	pending := apitest.EnqueueOK(t, c, apitest.HostileURL, "wait-pending")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(short, pending.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a pending job with no runner: %v, want the context's deadline", err)
	}
	if _, err := c.Wait(ctx, "no-such-job"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Wait on no job: %v, want ErrNotFound", err)
	}
	// Canceled by this client while waited on.
	done := make(chan *api.Job, 1)
	go func() { j, _ := c.Wait(ctx, pending.ID); done <- j }()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Cancel(ctx, pending.ID, "test", "no longer wanted"); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-done:
		if j == nil || j.State != store.StateCanceled {
			t.Errorf("Wait across a cancel: %v, want the job canceled", j)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return within 5s of the cancel")
	}

	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	t.Cleanup(tg.Close)
	r, err := c.NewRunner(runner.Config{Workers: 2, StartupSpread: time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(rctx) }()
	defer func() { stop(); <-ran }()
	res, err := c.Enqueue(ctx, api.Request{URL: tg.URL + "/pay", Body: []byte("{}")}, api.EnqueueOptions{Key: "wait-work"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	j, err := c.Wait(wctx, res.Job.ID)
	if err != nil || j.State != store.StateSucceeded || j.Result == nil || j.Result.HTTPStatus != http.StatusCreated {
		t.Errorf("Wait on a worked job: %+v %v, want it succeeded with the target's 201", j, err)
	}
}

// Through a runner's admin socket, Wait polls until the job settles.
func TestWaitThroughSocket(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	res, err := rem.Enqueue(ctx, api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{Key: "wait-socket"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *api.Job, 1)
	go func() { j, _ := rem.Wait(ctx, "wait-socket"); done <- j }()
	time.Sleep(100 * time.Millisecond)
	if _, err := c.Cancel(ctx, res.Job.ID, "test", "no longer wanted"); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-done:
		if j == nil || j.State != store.StateCanceled {
			t.Errorf("Wait through the socket: %v, want the job canceled", j)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait through the socket did not return within 5s of the cancel")
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	p, err := rem.Enqueue(ctx, api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{Key: "wait-socket-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rem.Wait(short, p.Job.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait through the socket on a pending job: %v, want the context's deadline", err)
	}
}

// Wait through a runner's admin API outlasts requests that get no answer
// (the runner restarting, a dropped connection) and returns the job once
// it settles.
func TestWaitThroughARunnerOutlastsDroppedRequests(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{})
	res, err := c.Enqueue(context.Background(), api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{Key: "wait-drops"})
	if err != nil {
		t.Fatal(err)
	}
	h := admin.Handler(c, admin.Options{Token: "tok"})
	var drop atomic.Bool
	var dropped atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drop.Load() {
			dropped.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // no answer at all
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rem, err := api.DialTCP(strings.TrimPrefix(srv.URL, "http://"), "tok", &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rem.Close() })
	drop.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var got *api.Job
	go func() {
		var err error
		got, err = rem.Wait(ctx, "wait-drops")
		done <- err
	}()
	for dropped.Load() < 3 { // a few unanswered requests
		select {
		case err := <-done:
			t.Fatalf("Wait returned while its requests went unanswered: %v, %v", got, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := c.Cancel(context.Background(), res.Job.ID, "t", ""); err != nil {
		t.Fatal(err)
	}
	drop.Store(false)
	if err := <-done; err != nil || got.State != store.StateCanceled {
		t.Fatalf("Wait through dropped requests = %v, %v; want the job canceled", got, err)
	}
}
