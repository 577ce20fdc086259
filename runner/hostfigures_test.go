package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// A runner younger than the figures' window reports its send rate over
// its life, not over a window it has not lived: 40 sends in its first
// second or two are more than 4 a second.
func TestHostFiguresRateOfAYoungRunner(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	t.Cleanup(srv.Close)
	db := openStore(t)
	for range 40 {
		enqueue(t, db, defaultJob(srv.URL))
	}
	cfg := testConfig(t)
	start := time.Now()
	r := runner.New(db, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	age := time.Since(start)
	figs := r.HostFigures()
	if len(figs) != 1 || figs[0].Host != store.HostOf(srv.URL) {
		t.Fatalf("host figures %+v, want the target's", figs)
	}
	got := figs[0].Recent.SendRate
	want := 40 / max(time.Second, min(store.TrafficWindow, age)).Seconds()
	t.Logf("40 sends in %s: send rate %.1f/s", age.Round(time.Millisecond), got)
	if got < want*0.9 || got > want*1.1+1 {
		t.Errorf("send rate %.1f/s after 40 sends in %s, want about %.1f/s", got, age, want)
	}
}
