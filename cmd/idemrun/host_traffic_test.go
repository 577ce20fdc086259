package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
)

// hostTrafficFlow runs a runner process sending to a slow target that
// answers some requests 429, and checks that host list shows its live
// figures: sends in flight, the send rate, the 429s, the breaker. It
// returns the runner, still running.
func hostTrafficFlow(t *testing.T, e *env, runArgs ...string) (*runnerProc, string) {
	t.Helper()
	tg, err := faketarget.Start(faketarget.Config{Faults: faketarget.Faults{Latency: 200 * time.Millisecond, TooMany429: 0.3, RetryAfter: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	host := store.HostOf(tg.URL())
	lines := make([]string, 200)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"url":%q,"key":"tr-%d"}`, tg.URL()+"/payments", i)
	}
	if r := e.runStdin([]byte(strings.Join(lines, "\n")+"\n"), "enqueue", "--from", "-"); r.code != 0 {
		t.Fatalf("enqueue: %s", r)
	}
	p := e.startRunner(append([]string{"--workers", "4"}, runArgs...)...)
	var seen map[string]any
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		tr, _ := e.hostList()[host]["traffic"].(map[string]any)
		if tr != nil && tr["in_flight"].(float64) > 0 && tr["send_rate"].(float64) > 0 && tr["recent_429"].(float64) > 0 {
			seen = tr
			break
		}
	}
	if seen == nil {
		t.Fatalf("host list --json never showed %s in flight, with a send rate and 429s: %v\nrunner:\n%s", host, e.hostList()[host], p.logs)
	}
	if seen["breaker"] != "closed" || seen["runners"] != 1.0 || seen["in_flight"].(float64) > 4 || seen["send_rate"].(float64) > 4/0.2+1 {
		t.Errorf("traffic of %s: %v; want one runner's, breaker closed, at most 4 in flight and 21/s", host, seen)
	}
	r := e.ok("host", "list")
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == host {
			// HOST POLICY RATE BURST CONC SETTLE PAUSED PENDING UNKNOWN DUE IN-FLIGHT SEND-RATE 429 5XX TIMEOUTS BREAKER
			if len(f) < 16 || f[10] == "-" || !strings.HasSuffix(f[11], "/s") || f[12] == "-" || f[15] != "closed" {
				t.Errorf("host list shows no live figures for %s:\n%s", host, r.stdout)
			}
			return p, host
		}
	}
	t.Errorf("host list has no line for %s:\n%s", host, r.stdout)
	return p, host
}

// On a bbolt file the CLI reaches the runner's figures through its admin
// socket.
func TestHostListTrafficFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, _ := hostTrafficFlow(t, e)
	p.stop(syscall.SIGTERM)
}

// On Postgres each runner publishes its figures with its lease; a killed
// runner's are ignored once its lease expired.
func TestHostListTrafficPostgres(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	e.ok("migrate")
	p, host := hostTrafficFlow(t, e, "--lease-ttl", "3s")
	p.stop(syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		h := e.hostList()[host]
		if h["traffic"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host list still shows the figures of a runner killed 10 s ago (lease TTL 3s): %v", h)
		}
	}
}
