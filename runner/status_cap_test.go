package runner_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// The first POST gets a 502 (unknown); the status endpoint answers 2xx JSON
// whose status word is at the very start but whose body is longer than the
// checker's 64 KiB cap. A prefix proves no end (P6): "failed" may be
// repeated further on, so it is no answer; "processing" is queried again;
// a second list item is a duplicate. None ends succeeded, none is resent:
// each ends needs_attention after one create.
func TestStatusAnswerOverCapProvesNoEnd(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("x", 80<<10)
	for _, tc := range []struct {
		name string
		body string
		bad  store.State // the state that claims more than is known
	}{
		{"failed", `{"status":"failed","log":"` + pad + `"}`, store.StateSucceeded},
		{"processing", `{"status":"processing","log":"` + pad + `"}`, store.StateSucceeded},
		{"two items", `[{"id":"op_1","status":"succeeded"},{"id":"op_2","status":"succeeded","log":"` + pad + `"}]`, store.StateSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			var posts, queries atomic.Int64
			tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, _ int64, _ received) {
				if r.Method == http.MethodGet {
					queries.Add(1)
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, tc.body)
					return
				}
				posts.Add(1)
				w.WriteHeader(http.StatusBadGateway)
			})
			j := newJob(tg.URL(), func(j *store.Job) { j.StatusURL = tg.URL() + "/status/{key}" })
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.StatusBudget = 3
			runIdle(t, db, cfg)
			got := getJob(t, db, j.ID)
			t.Logf("posts=%d queries=%d state=%s reason=%q", posts.Load(), queries.Load(), got.State, got.Reason)
			if got.State == tc.bad {
				t.Errorf("status answer %q... (over the cap) ended the job %s; ARCHITECTURE.md §5 says this answer is not 'found, succeeded'", tc.body[:40], got.State)
			}
			if got.State != store.StateNeedsAttention || posts.Load() != 1 {
				t.Errorf("status answer %q... (over the cap): job %s after %d creates; want needs_attention after 1 (never replayed)", tc.body[:40], got.State, posts.Load())
			}
		})
	}
}
