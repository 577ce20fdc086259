package runner_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/loopback"
	"github.com/idemrun/idemrun/store"
)

// A target's malformed status line is quoted into the attempt's error,
// which is stored twice (history event and last_error): each copy is cut to
// a few KiB, so one answer cannot grow the job record by megabytes (the
// history is bounded in events and in bytes).
func TestErrorTextStoredBounded(t *testing.T) {
	ln := loopback.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for { // read the request head
			l, err := br.ReadString('\n')
			if err != nil || l == "\r\n" {
				break
			}
		}
		_, _ = br.Discard(br.Buffered())
		_, _ = c.Write([]byte("HTTP/1.1" + strings.Repeat("\x01", 4<<20) + "\r\n\r\n"))
		// Close only after the client has: closing with its bytes
		// unread would reset the connection under the answer.
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	db := openStore(t)
	j := newJob("http://"+ln.Addr().String(), func(j *store.Job) { j.MaxAttempts = 3; j.KeyTTL = time.Hour })
	enqueue(t, db, j)
	// Three 4 MiB answers parsed under -race take ~5 s on a quiet 2-core
	// machine; with the other packages' tests beside it they took more
	// than runIdle's 15 s once. The bound tested is on bytes, not time.
	runIdleWithin(t, db, testConfig(t), 60*time.Second)
	got := getJob(t, db, j.ID)
	total := len(got.LastError)
	for _, e := range got.History {
		total += len(e.Error) + len(e.Detail)
	}
	t.Logf("state %s attempts %d; error text stored: %d bytes (last_error %d)", got.State, got.Attempts, total, len(got.LastError))
	if total > 1<<20 {
		t.Fatalf("job record holds %d bytes of error text from %d answers", total, got.Attempts)
	}
}
