package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// startWatch starts `idemrun watch ARGS` in this process and returns its
// stdout lines; it is stopped (its context canceled) when the test ends.
func (e *env) startWatch(args ...string) chan string {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	m := &Main{Stdin: bytes.NewReader(nil), Stdout: w, Stderr: &syncBuffer{}, Getenv: e.getenv()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, append([]string{"watch"}, args...))
		w.Close()
	}()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	e.t.Cleanup(func() {
		cancel()
		out.Close() // a refresh still writing gets an error, not a wait
		<-done
	})
	return lines
}

// `idemrun watch` started while no runner holds the file opens it only for
// each refresh: a runner started meanwhile gets the file and starts.
func TestWatchDoesNotBlockRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://"+freePort(t)+"/x")
	lines := e.startWatch("--db", e.db, "--interval", "200ms")
	select {
	case <-lines:
	case <-time.After(10 * time.Second):
		t.Fatal("watch printed nothing within 10s")
	}
	p := e.spawnRunner("--db", e.db, "--workers", "1")
	select {
	case <-p.started:
		p.stop(syscall.SIGTERM)
	case <-p.exited:
		t.Errorf("runner started while `idemrun watch` runs: exited %d before starting:\n%s", p.code, p.logs)
	case <-time.After(15 * time.Second):
		t.Fatalf("runner neither started nor exited within 15s:\n%s", p.logs)
	}
}

var rateRe = regexp.MustCompile(`finished/s=(-?[0-9.]+|n/a)`)

// watch's finished/s is the growth of succeeded+failed+canceled between two
// refreshes; a job leaving an end state (a retry, the retention sweep) must
// not show as a negative finish rate (it shows n/a).
func TestWatchRateNeverNegative(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var n atomic.Int32
	release := make(chan struct{})
	defer close(release)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(400) // permanent: failed
			return
		}
		select { // the retried attempt stays in flight
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(200)
	})
	p := e.startRunner("--db", e.db, "--workers", "2", "--shutdown-grace", "100ms")
	defer p.stop(syscall.SIGTERM)
	id := jsonObject(t, e.ok("enqueue", "--url", tg.url("/x"), "--json"))["id"].(string)
	e.waitState(id, "failed", 10*time.Second)

	lines := e.startWatch("--db", e.db, "--interval", "300ms")
	<-lines
	e.ok("retry", id)
	deadline := time.After(3 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("watch ended")
			}
			m := rateRe.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			if r, _ := strconv.ParseFloat(m[1], 64); r < 0 {
				t.Fatalf("watch after one `idemrun retry` (no job finished): got %q, want finished/s ≥ 0", strings.TrimSpace(l))
			}
		case <-deadline:
			return
		}
	}
}
