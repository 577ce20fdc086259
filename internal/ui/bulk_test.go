package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/ui"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// A bulk action changes the jobs it counted: a job that came to match
// the filter between the count and the confirmation is left as it is.
func TestBulkConfirmChangesTheJobsCounted(t *testing.T) {
	ctx := context.Background()
	c := openBackend(t, "bolt")
	tgt := target(t)
	fail := func(n int) []string {
		t.Helper()
		var ids []string
		for range n {
			res, err := c.Enqueue(ctx, api.Request{URL: tgt.URL + "/reject", Body: []byte(`{}`)}, api.EnqueueOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Job.ID)
		}
		r, err := c.NewRunner(runner.Config{Workers: 2, UntilIdle: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := r.Run(rctx); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	counted := fail(2)
	srv := httptest.NewServer(ui.Handler(c, ui.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	post := func(form url.Values) string {
		t.Helper()
		resp, err := http.PostForm(srv.URL+"/ui/bulk", form)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /ui/bulk %v: %s\n%s", form, resp.Status, b)
		}
		return string(b)
	}
	form := url.Values{"action": {"retry"}, "host": {strings.TrimPrefix(tgt.URL, "http://")}, "note": {"fixed"}, "step": {"count"}}
	page := post(form)
	if !strings.Contains(page, `id="matched">2<`) {
		t.Fatalf("the count does not show the 2 failed jobs:\n%s", page)
	}
	m := regexp.MustCompile(`name="counted_at" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the count page sends no counted_at back:\n%s", page)
	}
	late := fail(1)[0] // fails after the count
	form.Set("step", "confirm")
	form.Set("counted_at", m[1])
	done := post(form)
	if !strings.Contains(done, `id="changed">2<`) {
		t.Errorf("the confirmation does not report the 2 jobs counted as changed:\n%s", done)
	}
	for _, id := range counted {
		if j, err := c.Get(ctx, id); err != nil || j.State != store.StatePending {
			t.Errorf("counted job %s: %v %v, want it retried (pending)", id, j.State, err)
		}
	}
	if j, err := c.Get(ctx, late); err != nil || j.State != store.StateFailed {
		t.Errorf("job %s failed after the count: %v %v, want it left failed", late, j.State, err)
	}
	form.Set("counted_at", "yesterday")
	resp, err := http.PostForm(srv.URL+"/ui/bulk", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a confirmation with counted_at yesterday: %s, want 400", resp.Status)
	}
}
