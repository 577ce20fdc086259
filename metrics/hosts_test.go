package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store/bolt"
)

type fixedHosts []runner.HostFigures

func (f fixedHosts) HostFigures() []runner.HostFigures {
	return append([]runner.HostFigures(nil), f...)
}

// The busiest TopHosts hosts get series of their own, the rest are summed
// under "other"; the breaker and throttled gauges count hosts.
func TestWatchHosts(t *testing.T) {
	var figs fixedHosts
	for i := range TopHosts + 3 {
		figs = append(figs, runner.HostFigures{Host: fmt.Sprintf("h%02d.example", i), Sends: uint64(100 - i), TooMany: 1, ServerErrors: 2, Breaker: "closed"})
	}
	figs[0].Breaker = "open"
	figs[TopHosts+1].Breaker = "open"
	figs[1].Throttled, figs[TopHosts+2].Throttled = true, true
	db, err := bolt.Open(t.TempDir()+"/m.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := New(db)
	m.WatchHosts(figs)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`idemrun_host_sends_total{host="h00.example"} 100`,
		`idemrun_host_breaker{host="h00.example",state="open"} 1`,
		`idemrun_host_sends_total{host="other"} 237`, // 80 + 79 + 78
		`idemrun_host_429_total{host="other"} 3`,
		`idemrun_host_5xx_total{host="h00.example"} 2`,
		`idemrun_host_5xx_total{host="other"} 6`,
		`idemrun_host_throttled{host="h00.example"} 0`,
		`idemrun_host_throttled{host="h01.example"} 1`,
		`idemrun_host_throttled{host="other"} 1`,
		`idemrun_host_breaker{host="other",state="open"} 1`,
		`idemrun_host_breaker{host="other",state="closed"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(text, fmt.Sprintf(`host="h%02d.example"`, TopHosts)) {
		t.Errorf("a host beyond the top %d has series of its own", TopHosts)
	}
}
