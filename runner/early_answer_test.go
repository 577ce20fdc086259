package runner_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
	"github.com/idemrun/idemrun/store"
)

// earlyTarget reads only the request head, counts it, writes resp at
// once and then, depending on mode, stops reading and holds the
// connection ("hold") or closes it ("close").
func earlyTarget(t *testing.T, resp, mode string) (string, *atomic.Int64) {
	t.Helper()
	var heads atomic.Int64
	ln := loopback.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		heads.Add(1)
		_, _ = io.WriteString(c, resp)
		if mode == "hold" {
			<-t.Context().Done()
		}
	})
	return "http://" + ln.Addr().String(), &heads
}

// The target answers 413 (or 201)
// after reading only the request head and then stops reading. ARCHITECTURE.md §3
// classifies by the answer: 413 is permanent (failed), 2xx succeeded.
func TestEarlyAnswerWhileBodyBlocked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, resp, mode string
		want             store.State
	}{
		{"413 hold", "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "hold", store.StateFailed},
		// Closing with the body unread makes the server's kernel send a
		// reset, which can discard the 413 before the client reads it;
		// then the outcome is unknown and needs_attention is right too.
		{"413 close", "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "close", store.StateNeedsAttention},
	} {
		for _, nethttp := range []bool{false, true} {
			name := tc.name + "/runner"
			if nethttp {
				name = tc.name + "/nethttp"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				url, heads := earlyTarget(t, tc.resp, tc.mode)
				db := openStore(t)
				j := newJob(url, func(j *store.Job) {
					j.Request.Body = []byte(`{"blob":"` + strings.Repeat("a", 16<<20) + `"}`)
					j.AttemptTimeout = 2 * time.Second
					j.MaxAttempts = 1
				})
				enqueue(t, db, j)
				cfg := testConfig(t)
				cfg.Doer = nil
				cfg.NetHTTP = nethttp
				runIdle(t, db, cfg)
				got := getJob(t, db, j.ID)
				t.Logf("heads=%d state=%s last=%q", heads.Load(), got.State, got.LastError)
				if got.State != store.StateFailed && got.State != tc.want || heads.Load() != 1 {
					t.Errorf("state %s after %d sends, want failed (or %s) after 1", got.State, heads.Load(), tc.want)
				}
			})
		}
	}
}

// Same target, the job gives a key TTL.
// The target said 413 to the first send; ARCHITECTURE.md §3 makes that permanent,
// so there must be exactly one send.
func TestEarlyAnswerNotResentInTTL(t *testing.T) {
	t.Parallel()
	url, heads := earlyTarget(t, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "hold")
	db := openStore(t)
	j := newJob(url, func(j *store.Job) {
		j.Request.Body = []byte(`{"blob":"` + strings.Repeat("a", 16<<20) + `"}`)
		j.AttemptTimeout = time.Second
		j.MaxAttempts = 3
		j.KeyTTL = time.Hour
	})
	enqueue(t, db, j)
	cfg := testConfig(t)
	cfg.Doer = nil
	runIdle(t, db, cfg)
	got := getJob(t, db, j.ID)
	t.Logf("heads=%d state=%s last=%q", heads.Load(), got.State, got.LastError)
	if got.State != store.StateFailed || heads.Load() != 1 {
		t.Errorf("state %s after %d sends, want failed after 1", got.State, heads.Load())
	}
}
