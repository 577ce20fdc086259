package runner_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// TestRedirectWithBadLocationIsPermanent: ARCHITECTURE.md §3 "3xx | permanent ("redirect not
// followed")". A 302 whose Location does not parse is still a 3xx answer
// from the target, for both default Doers.
func TestRedirectWithBadLocationIsPermanent(t *testing.T) {
	t.Parallel()
	for _, nethttp := range []bool{false, true} {
		name := "runner-transport"
		if nethttp {
			name = "net-http"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openStore(t)
			tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
				w.Header()["Location"] = []string{"http://[::1/%zz"}
				w.WriteHeader(http.StatusFound)
			})
			j := newJob(tg.URL(), func(j *store.Job) {
				j.MaxAttempts = 5
				j.KeyTTL = time.Hour
			})
			enqueue(t, db, j)
			cfg := testConfig(t)
			cfg.Doer = nil
			cfg.NetHTTP = nethttp
			runIdle(t, db, cfg)
			got := getJob(t, db, j.ID)
			t.Logf("sends=%d state=%s last=%q", tg.N(), got.State, got.LastError)
			if got.State != store.StateFailed || tg.N() != 1 {
				t.Errorf("302 answer: job %s after %d sends; want failed after 1 (3xx is permanent)", got.State, tg.N())
			}
		})
	}
}
