package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/store"
)

// The key format changes the bytes sent (Idempotency-Key: k vs "k"), and
// the store counts it as part of the request that never changes
// (sameRequest), yet a re-enqueue with the other format is "the same job".
func TestReenqueueWithOtherKeyFormatConflicts(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()
	req := api.Request{URL: "https://api.example.com/pay", Body: []byte(`{"amount":1}`)}
	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "fmt-key"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "fmt-key", KeyFormat: idemkey.FormatStructured})
	if err == nil {
		t.Fatalf("re-enqueue with key format structured: Existing=%v, want a key conflict (the stored job sends the token form)", res.Existing)
	}
	if !errors.Is(err, store.ErrKeyConflict) {
		t.Fatalf("err %v, want ErrKeyConflict", err)
	}
}
