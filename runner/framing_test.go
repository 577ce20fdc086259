package runner_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
	"github.com/idemrun/idemrun/store"
)

// rawTarget is a TCP server on 127.0.0.1 that reads each request fully
// (counting it as a create once its body has arrived) and then lets
// respond write raw bytes. respond returns false to close the connection.
type rawTarget struct {
	ln      net.Listener
	creates atomic.Int64
	conns   atomic.Int64
}

func newRawTarget(t *testing.T, respond func(c net.Conn, br *bufio.Reader, n int64) bool) *rawTarget {
	t.Helper()
	rt := &rawTarget{}
	rt.ln = loopback.Serve(t, func(c net.Conn) {
		rt.conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if !respond(c, br, rt.creates.Add(1)) {
				return
			}
		}
	})
	return rt
}

func (rt *rawTarget) URL() string { return "http://" + rt.ln.Addr().String() }

// Odd but legal framings (HTTP/1.0, chunked with trailers, interim
// answers, a body cut short, a garbage status line): each job is created
// once at the server, ends as its final answer says, and a connection is
// reused only where the framing allows.
func TestOddFramingCreatesOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		resp string
		keep bool
		want store.State
	}{
		{"http10 no length", "HTTP/1.0 201 Created\r\n\r\n{\"id\":1}", false, store.StateSucceeded},
		{"http10 keepalive length", "HTTP/1.0 201 Created\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", true, store.StateSucceeded},
		{"chunked trailers", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: v\r\n\r\n", true, store.StateSucceeded},
		{"interim then final", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", true, store.StateSucceeded},
		{"closed mid body", "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\nok", false, store.StateSucceeded},
		{"interim then close", "HTTP/1.1 100 Continue\r\n\r\n", false, store.StateNeedsAttention},
		{"no status line", "garbage\r\n\r\n", false, store.StateNeedsAttention},
		{"400 closed mid body", "HTTP/1.1 400 Bad Request\r\nContent-Length: 100\r\n\r\nno", false, store.StateFailed},
		{"429 no length http10", "HTTP/1.0 503 Service Unavailable\r\n\r\nbusy", false, store.StateNeedsAttention},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt := newRawTarget(t, func(c net.Conn, _ *bufio.Reader, _ int64) bool {
				_, _ = io.WriteString(c, tc.resp)
				return tc.keep
			})
			db := openStore(t)
			j1 := newJob(rt.URL())
			enqueue(t, db, j1)
			cfg := testConfig(t)
			runIdle(t, db, cfg)
			// A second job on the same runner config's client: reuses the
			// connection if it was kept.
			j2 := newJob(rt.URL())
			enqueue(t, db, j2)
			runIdle(t, db, cfg)
			for _, j := range []*store.Job{j1, j2} {
				got := getJob(t, db, j.ID)
				if got.State != tc.want {
					t.Errorf("job state %s (%q), want %s", got.State, got.LastError, tc.want)
				}
			}
			if n := rt.creates.Load(); n != 2 {
				t.Errorf("creates = %d, want 2", n)
			}
			t.Logf("%s: conns=%d", tc.name, rt.conns.Load())
		})
	}
	_ = time.Second
}
