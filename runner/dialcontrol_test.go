package runner_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// Config.DialControl sees the address of every connection the default
// Doer (either transport) and the default status checker dial, and a
// refusal there keeps the request from leaving: counted at the target.
func TestDialControlRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	for _, netHTTP := range []bool{false, true} {
		t.Run(map[bool]string{false: "runner transport", true: "net/http transport"}[netHTTP], func(t *testing.T) {
			t.Parallel()
			// The create answers 500 (outcome unknown), so the job then
			// asks its status endpoint, on another server the dialer
			// refuses.
			create := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
				w.WriteHeader(http.StatusInternalServerError)
			})
			status := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"status":"succeeded"}`))
			})
			refused := strings.TrimPrefix(status.URL(), "http://")
			var mu sync.Mutex
			var dialed []string
			cfg := testConfig(t)
			cfg.Doer, cfg.NetHTTP = nil, netHTTP
			cfg.StatusBudget = 2
			cfg.DialControl = func(network, address string, _ syscall.RawConn) error {
				mu.Lock()
				dialed = append(dialed, address)
				mu.Unlock()
				if address == refused {
					return errors.New("refused by the test")
				}
				return nil
			}
			db := openStore(t)
			j := newJob(create.URL(), func(j *store.Job) { j.StatusURL = status.URL() + "/s/{key}" })
			enqueue(t, db, j)
			runIdle(t, db, cfg)

			got := getJob(t, db, j.ID)
			if n := len(status.received()); n != 0 {
				t.Errorf("the status server got %d queries through a refused dial", n)
			}
			if len(create.received()) == 0 {
				t.Errorf("the create server got nothing: DialControl refused an allowed address (dialed %v)", dialed)
			}
			if got.State != store.StateNeedsAttention {
				t.Errorf("job %s (%s), want needs_attention: its status could never be asked", got.State, got.Reason)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(strings.Join(dialed, " "), refused) || !strings.Contains(strings.Join(dialed, " "), strings.TrimPrefix(create.URL(), "http://")) {
				t.Errorf("DialControl saw %v, want both servers' addresses", dialed)
			}
		})
	}
}

// A refused status query (Config.CheckQuery) sends nothing and counts as
// no answer: the job ends in needs_attention once the budget is spent.
func TestCheckQueryRefusal(t *testing.T) {
	t.Parallel()
	create := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		w.WriteHeader(http.StatusBadGateway)
	})
	status := newTarget(t, func(w http.ResponseWriter, _ *http.Request, _ int64, _ received) {
		_, _ = w.Write([]byte(`{"status":"succeeded"}`))
	})
	cfg := testConfig(t)
	cfg.StatusBudget = 2
	cfg.CheckQuery = func(ctx context.Context, j *store.Job) error { return errors.New("host not on the allowlist") }
	db := openStore(t)
	j := newJob(create.URL(), func(j *store.Job) { j.StatusURL = status.URL() + "/s/{key}" })
	enqueue(t, db, j)
	runIdle(t, db, cfg)
	got := getJob(t, db, j.ID)
	if n := len(status.received()); n != 0 || got.State != store.StateNeedsAttention {
		t.Errorf("status server got %d queries, job %s; want 0 and needs_attention", n, got.State)
	}
}
