package runner_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// TestBodyCutShortMarksResultTruncated: a 201 whose body is cut short
// (Content-Length 100, 2 bytes, close). The job is succeeded (ARCHITECTURE.md §3),
// but the stored result must not present 2 bytes as the whole answer.
func TestBodyCutShortMarksResultTruncated(t *testing.T) {
	t.Parallel()
	rt := newRawTarget(t, func(c net.Conn, _ *bufio.Reader, _ int64) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\nok")
		return false
	})
	db := openStore(t)
	j := newJob(rt.URL())
	enqueue(t, db, j)
	runIdle(t, db, testConfig(t))
	got := getJob(t, db, j.ID)
	wantState(t, got, store.StateSucceeded)
	ev := got.LastEvent(store.EventAttempt)
	t.Logf("result=%+v event.Error=%q truncated=%v", got.Result, ev.Error, ev.Truncated)
	if got.Result == nil || !got.Result.Truncated {
		t.Errorf("result body %q of a 100-byte answer is stored with Truncated=false", got.Result.Body)
	}
	if !ev.Truncated || !strings.Contains(ev.Error, "reading response body") {
		t.Errorf("attempt event: truncated=%v error=%q; want truncated and the read error", ev.Truncated, ev.Error)
	}
}
