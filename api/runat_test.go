package api_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
)

// TestRunAtPastDeadlineRefused: a first run after the job's deadline could
// never be sent; it is refused (and dates far beyond the index's range can
// no longer wrap around to "due now").
func TestRunAtPastDeadlineRefused(t *testing.T) {
	c, err := api.Open(filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte(`{}`)}
	for _, at := range []time.Time{time.Now().Add(time.Hour), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := c.Enqueue(context.Background(), req, api.EnqueueOptions{Deadline: 15 * time.Minute, RunAt: at})
		if !errors.Is(err, api.ErrInvalid) {
			t.Errorf("RunAt %s with a 15m deadline: err = %v, want ErrInvalid", at, err)
		}
	}
	if st, _ := c.Stats(context.Background()); st["pending"] != 0 {
		t.Errorf("refused enqueues stored %d jobs", st["pending"])
	}
	if _, err := c.Enqueue(context.Background(), req, api.EnqueueOptions{Deadline: time.Hour, RunAt: time.Now().Add(time.Minute)}); err != nil {
		t.Errorf("RunAt inside the deadline: %v", err)
	}
}
