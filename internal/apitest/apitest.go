// Package apitest holds the test helpers of the api package's tests that
// the admin package's tests share: a client on a fresh file checked at
// cleanup, a snapshot of everything a refused call must leave unchanged,
// jobs in given states, and the enqueue bodies both fuzz targets start
// from.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// HostileURL is a well-formed target that nothing in these tests sends to.
const HostileURL = "http://127.0.0.1:9/pay"

// Clip quotes s for a failure message, shortened to 200 bytes.
func Clip[T string | []byte](s T) string {
	if len(s) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", s[:200], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// CheckInvalid fails unless err is an *InvalidError wrapping ErrInvalid.
func CheckInvalid(t *testing.T, where string, err error) {
	t.Helper()
	var ie *api.InvalidError
	if !errors.Is(err, api.ErrInvalid) || !errors.As(err, &ie) {
		t.Fatalf("%s: got error %v (%T), want an *api.InvalidError wrapping api.ErrInvalid", where, err, err)
	}
	if ie.Field == "" || ie.Accepted == "" {
		t.Fatalf("%s: got InvalidError %+v, want the field and what is accepted named", where, ie)
	}
}

// OpenClient opens an api.Client on a new file in t.TempDir. Its cleanup
// checks the file's consistency and closes it.
func OpenClient(t *testing.T, o api.Options) *api.Client {
	t.Helper()
	o.Warn = io.Discard
	c, err := api.Open(filepath.Join(t.TempDir(), "h.db"), &o)
	if err != nil {
		t.Fatalf("api.Open: %v", err)
	}
	t.Cleanup(func() {
		rep, err := c.Check(context.Background())
		if err != nil || !rep.OK() {
			t.Errorf("store check: err %v, problems %v", err, rep.Problems)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// Snapshot is everything a refused call must leave unchanged: the counts,
// a full list, and every job's full view (history included).
func Snapshot(t *testing.T, c *api.Client) string {
	t.Helper()
	ctx := context.Background()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	page, err := c.List(ctx, api.ListFilter{Limit: store.MaxListLimit})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	_ = enc.Encode(st)
	_ = enc.Encode(page)
	for _, j := range page.Jobs {
		full, err := c.Get(ctx, j.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", j.ID, err)
		}
		_ = enc.Encode(full)
	}
	return b.String()
}

// EnqueueOK stores a POST of body to target under key and fails the test
// otherwise.
func EnqueueOK(t *testing.T, c *api.Client, target, key string) *api.Job {
	t.Helper()
	res, err := c.Enqueue(context.Background(), api.Request{URL: target, Body: []byte(`{"n":1}`)}, api.EnqueueOptions{Key: key})
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", key, err)
	}
	return res.Job
}

// NeedsAttention enqueues a job under key and moves it to needs_attention
// through the store, as a runner would after an unconfirmable attempt. It
// must be called while no other job is pending.
func NeedsAttention(t *testing.T, c *api.Client, key string) *api.Job {
	t.Helper()
	ctx := context.Background()
	j := EnqueueOK(t, c, HostileURL, key)
	claims, err := c.Store().ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: time.Now().Add(time.Second), Limit: 1})
	if err != nil || len(claims) != 1 || claims[0].Job.ID != j.ID {
		t.Fatalf("claiming %s: got %d claims, err %v", key, len(claims), err)
	}
	if _, _, err := c.Store().FinishClaim(ctx, claims[0], func(sj *store.Job) error {
		sj.State = store.StateNeedsAttention
		sj.MayHaveEffect = true
		sj.Reason = "test: the outcome could not be confirmed"
		return nil
	}, nil); err != nil {
		t.Fatalf("FinishClaim(%s): %v", key, err)
	}
	return j
}

// EnqueueSeeds are enqueue bodies for the fuzz targets of the enqueue
// decoder and of the admin API's enqueue; more hostile ones are in their
// testdata/fuzz.
var EnqueueSeeds = []string{
	`{"url":"http://127.0.0.1:9/pay","method":"POST","headers":[{"name":"Content-Type","value":"application/json"}],"body":"eyJhIjoxfQ==","key":"seed-1"}`,
	`{"url":"http://127.0.0.1:9/pay","key":"seed-2","status_url":"http://127.0.0.1:9/s/{key}","key_ttl":"1h","max_attempts":3,"deadline":"10m","attempt_timeout":"5s","replay_safe":true,"no_effect_statuses":[503],"key_format":"structured"}`,
	`{"url":"http://127.0.0.1:9/pay","colour":"red"}`,
	`{"url":5}`,
	`{"url":"http://127.0.0.1:9/pay","max_attempts":"5"}`,
	`{"url":"http://127.0.0.1:9/pay","body":"not base64!"}`,
	`{"url":"http://127.0.0.1:9/pay","headers":{"a":"b"}}`,
	`{"url":"http://127.0.0.1:9/pay","deadline":5}`,
	`{"url":"http://127.0.0.1:9/pay","key_ttl":"9999999999h"}`,
	`{"url":"http://127.0.0.1:9/pay","headers":[{"name":"X-A","value":"a\u0000b"}]}`,
	`{"url":"http://127.0.0.1:9/pay","key":"seed-3"} {"url":"http://127.0.0.1:9/other"}`,
	`null`,
	`[]`,
	``,
	`{`,
}
