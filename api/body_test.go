package api_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// RequestBody returns the stored body byte for byte, with the job's own
// secrets (its sensitive header values and credential URL parameters)
// scrubbed when the body repeats them; by key as well as by id; through
// a runner's socket it is not offered.
func TestRequestBody(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPairWith(t, api.Options{Warn: io.Discard})
	body := `{"memo":"<b>hi</b>","echo":"HEADERSECRET and PARAMSECRET"}`
	res, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay?api_key=PARAMSECRET",
		Header: []api.Header{{Name: "Authorization", Value: "Bearer HEADERSECRET"}}, Body: []byte(body)}, api.EnqueueOptions{Key: "body-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{res.Job.ID, "body-1"} {
		got, err := c.RequestBody(ctx, ref)
		if err != nil {
			t.Fatalf("RequestBody(%s): %v", ref, err)
		}
		if s := string(got); strings.Contains(s, "HEADERSECRET") || strings.Contains(s, "PARAMSECRET") || !strings.Contains(s, `"memo":"<b>hi</b>"`) {
			t.Fatalf("RequestBody(%s) = %q; want the body with the job's secrets scrubbed", ref, s)
		}
	}
	plain, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte{0, 1, 0xff, 'x'}}, api.EnqueueOptions{Key: "body-2"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.RequestBody(ctx, plain.Job.ID); err != nil || string(got) != "\x00\x01\xffx" {
		t.Fatalf("RequestBody of a binary body = %q, %v; want its bytes", got, err)
	}
	if _, err := c.RequestBody(ctx, "no-such-job"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RequestBody of no job: %v, want ErrNotFound", err)
	}
	if _, err := rem.RequestBody(ctx, res.Job.ID); !errors.Is(err, api.ErrNotOffered) {
		t.Fatalf("RequestBody through the socket: %v, want ErrNotOffered", err)
	}
}
