package runner

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
)

// heldTarget reads a request head, writes answer, and then neither reads
// nor closes until the test ends.
func heldTarget(t *testing.T, answer string) string {
	t.Helper()
	ln := loopback.Serve(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, answer)
		<-t.Context().Done()
	})
	return "http://" + ln.Addr().String()
}

// The response head cannot be read (malformed, or over the header cap)
// while the 8 MiB body is still being written to a target that stopped
// reading: the write is cut off at once and the bad answer reported, not
// the attempt's deadline after a write that could never finish.
func TestLargeBodyBadAnswerReportedAtOnce(t *testing.T) {
	t.Parallel()
	url := heldTarget(t, "HTTP/1.1 abc nonsense\r\n\r\n")
	tr := newTransport(2, 2, nil, nil)
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, io.NopCloser(bytes.NewReader(make([]byte, 8<<20))))
	req.ContentLength = 8 << 20
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	took := time.Since(start)
	if resp != nil {
		resp.Body.Close()
	}
	t.Logf("after %v: err=%v", took.Round(time.Millisecond), err)
	if took > 2*time.Second {
		t.Errorf("a malformed answer took %v to report (the attempt's deadline); want at once", took.Round(time.Millisecond))
	}
}

// A target that reads each 64 KiB request fully and then answers at once
// on a keep-alive connection: the answer often arrives before the writer
// goroutine has handed its result over; the complete write is still seen
// as complete, and the one connection serves every exchange.
func TestLargeBodyConnectionReused(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	ln := loopback.Serve(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	tr := newTransport(2, 2, nil, nil)
	t.Cleanup(tr.CloseIdleConnections)
	const n = 200
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String(), io.NopCloser(bytes.NewReader(make([]byte, 64<<10))))
		req.ContentLength = 64 << 10
		resp, err := tr.RoundTrip(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
	}
	if c := conns.Load(); c > 1 {
		t.Errorf("%d sequential in-step exchanges used %d connections; want 1", n, c)
	}
}
