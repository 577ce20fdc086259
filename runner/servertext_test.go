package runner_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// A target that does the work (reads the whole request) and then answers
// with a response head net/http cannot parse, whose bad line holds
// net/http's own HTTP/2 refusal words. The request certainly arrived, so
// the outcome is unknown: without a status URL or key TTL the job is
// parked after one send, counted at the target, never replayed.
func TestServerTextIsNoProofOfRefusal(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"X-Upstream-Error (h2): stream error: stream ID 1; REFUSED_STREAM",
		"X-Upstream-Error (h2): http2: Transport received GOAWAY from server ErrCode=NO_ERROR",
	} {
		t.Run(line, func(t *testing.T) {
			t.Parallel()
			var created atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					return
				}
				created.Add(1) // the effect happened
				c, bw, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer c.Close()
				_, _ = bw.WriteString("HTTP/1.1 201 Created\r\n" + line + "\r\nContent-Length: 0\r\n\r\n")
				_ = bw.Flush()
			}))
			t.Cleanup(srv.Close)

			db := openStore(t)
			j := newJob(srv.URL) // POST, no status URL, no key TTL
			enqueue(t, db, j)
			runIdle(t, db, testConfig(t))

			after := getJob(t, db, j.ID)
			if n := created.Load(); n != 1 || after.State != store.StateNeedsAttention {
				t.Errorf("target created %d times, job %s (last class %q: %s); want 1 and needs_attention",
					n, after.State, after.LastClass, after.LastError)
			}
		})
	}
}
