package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/ui"
	"github.com/idemrun/idemrun/store"
)

// The hosts page shows each host's policy, waiting jobs and the live
// runners' recent traffic (here published to Postgres as runners on
// other nodes do): hosts in trouble (paused, breaker open) first, a host
// only a runner has sent to listed too, and the figures shown.
func TestHostsPageShowsHealth(t *testing.T) {
	ctx := context.Background()
	c := openBackend(t, "postgres")
	for _, u := range []string{"http://a.example/pay", "http://b.example/pay", "http://c.example/pay"} {
		if _, err := c.Enqueue(ctx, api.Request{URL: u, Body: []byte(`{}`)}, api.EnqueueOptions{RunAt: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PauseHost(ctx, "c.example", "test", "maintenance until 10:00"); err != nil {
		t.Fatal(err)
	}
	board, ok := c.Store().(interface {
		store.Work
		store.TrafficBoard
	})
	if !ok {
		t.Fatalf("the Postgres store %T keeps no traffic board", c.Store())
	}
	now := time.Now()
	if err := board.Register(ctx, store.RunnerInfo{ID: "node-1", Workers: 4}, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := board.PublishTraffic(ctx, "node-1", now, []store.HostTraffic{
		{Host: "a.example", Breaker: store.BreakerClosed, SendRate: 41, InFlight: 2},
		{Host: "b.example", Breaker: store.BreakerOpen, Timeouts: 7},
		{Host: "d.example", Breaker: store.BreakerClosed, Throttled: true, SendRate: 3, TooMany: 3},
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler(c, ui.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/ui/hosts")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	var order []string
	for _, row := range strings.Split(body, "<tr>")[2:] {
		host := row[strings.Index(row, `<td class="mono">`)+len(`<td class="mono">`):]
		host = host[:strings.Index(host, "<")]
		health := row[strings.Index(row, `class="health`):]
		health = health[strings.Index(health, ">")+1:]
		health = health[:strings.Index(health, "<")]
		order = append(order, host+"="+health)
	}
	want := []string{"b.example=breaker open", "c.example=paused", "d.example=throttled", "a.example=ok"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("hosts page rows %v, want %v", order, want)
	}
	for _, s := range []string{"maintenance until 10:00", `<td class="num">41.0</td>`} {
		if !strings.Contains(body, s) {
			t.Errorf("the hosts page lacks %q", s)
		}
	}
}
