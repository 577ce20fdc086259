package api_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// The errors application code checks come from this package too, as the
// store's own values.
func TestStoreErrorsThroughAPI(t *testing.T) {
	ctx := context.Background()
	c, err := api.Open(filepath.Join(t.TempDir(), "e.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := api.Request{Method: "POST", URL: "http://127.0.0.1:9/p", Body: []byte("a")}
	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	req.Body = []byte("b")
	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "k"}); !errors.Is(err, api.ErrKeyConflict) {
		t.Errorf("same key, other body: %v; want api.ErrKeyConflict", err)
	}
	if _, err := c.Get(ctx, "no-such-key"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown key: %v; want api.ErrNotFound", err)
	}
}
