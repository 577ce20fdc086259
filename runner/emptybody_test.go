package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// TestEmptyBodySendsContentLengthZero: a POST with an empty body goes out
// with "Content-Length: 0" (not chunked) and still carries its key.
func TestEmptyBodySendsContentLengthZero(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gotTE []string
	var gotCL int64 = -2
	var gotKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotTE, gotCL, gotKey = r.TransferEncoding, r.ContentLength, r.Header.Get("Idempotency-Key")
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	db := openStore(t)
	j := newJob(srv.URL, func(j *store.Job) { j.Request.Body = nil })
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))
	mu.Lock()
	defer mu.Unlock()
	if gotCL != 0 || len(gotTE) != 0 {
		t.Errorf("server saw Content-Length %d, Transfer-Encoding %v; want 0 and none", gotCL, gotTE)
	}
	if gotKey != j.Key {
		t.Errorf("server saw Idempotency-Key %q, want %q", gotKey, j.Key)
	}
	if got := getJob(t, db, j.ID); got.State != store.StateSucceeded {
		t.Errorf("state %s, want succeeded", got.State)
	}
	req, err := runner.BuildRequest(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody != nil {
		t.Errorf("request has GetBody; the transport could rewind and resend it")
	}
}
