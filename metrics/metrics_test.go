package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// idemrun_status_queries_total must count each status query once, also
// when the runner parks an unknown job because status queries are over
// (deadline + StatusGrace passed): that write adds no event, and the
// previous status query must not be counted a second time.
func TestStatusQueriesCountedOnce(t *testing.T) {
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(500) // unknown outcome
			return
		}
		w.WriteHeader(503) // status endpoint: no answer
	}))
	defer tg.Close()

	c, err := api.Open(filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := New(c.Store())
	parked := make(chan struct{})
	r, err := c.NewRunner(runner.Config{
		Workers:       2,
		QuietPeriod:   20 * time.Millisecond,
		StatusBackoff: runner.Backoff{Base: 150 * time.Millisecond, Cap: 150 * time.Millisecond},
		StatusGrace:   50 * time.Millisecond,
		PollInterval:  20 * time.Millisecond,
		StartupSpread: time.Millisecond,
		OnEvent:       m.ObserveEvent,
		OnWrite: func(j *store.Job) {
			if j.State == store.StateNeedsAttention {
				close(parked)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	res, err := c.Enqueue(ctx, api.Request{Method: "POST", URL: tg.URL + "/op", Body: []byte("x")},
		api.EnqueueOptions{Key: "metrics-once", StatusURL: tg.URL + "/status/{key}", Deadline: 400 * time.Millisecond, AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-parked:
	case <-time.After(10 * time.Second):
		t.Fatal("job not parked within 10s")
	}
	j, err := c.Get(context.Background(), res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	queries, attempts := 0, 0
	for _, e := range j.History {
		switch e.Kind {
		case store.EventStatusQuery:
			queries++
		case store.EventAttempt:
			attempts++
		}
	}
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var gotQ, gotA float64
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "idemrun_status_queries_total":
				gotQ += mt.GetCounter().GetValue()
			case "idemrun_attempts_total":
				gotA += mt.GetCounter().GetValue()
			}
		}
	}
	t.Logf("job %s: %s; history: %d attempts, %d status queries", j.ID, j.Reason, attempts, queries)
	if int(gotQ) != queries || int(gotA) != attempts {
		t.Errorf("metrics: got idemrun_status_queries_total=%v idemrun_attempts_total=%v, want %d and %d (one per event in the job's history)", gotQ, gotA, queries, attempts)
	}
}
