package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
)

// exampleRunner is a runner configuration with timings short enough for an
// example: it returns once no job is pending, running or unknown.
func exampleRunner() runner.Config {
	return runner.Config{
		Workers:       2,
		UntilIdle:     true,
		PollInterval:  10 * time.Millisecond,
		StartupSpread: time.Millisecond,
		QuietPeriod:   10 * time.Millisecond,
		// The examples' targets show a create at once: "not found" needs
		// no settle window.
		Settle:        -1,
		Backoff:       runner.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
		StatusBackoff: runner.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
	}
}

// answerOf is the status and body of the answer that ended j.
func answerOf(j *api.Job) string {
	if j.Result == nil {
		return "none"
	}
	return fmt.Sprint(j.Result.HTTPStatus, " ", j.Result.Body)
}

// sourceOf says whether an attempt or a status query ended j.
func sourceOf(j *api.Job) string {
	if j.Result == nil {
		return "none"
	}
	return j.Result.Source
}

// A job is enqueued under the caller's key, enqueued again after a
// (simulated) crash of the caller without creating a second job, and sent
// once by a runner.
func ExampleClient_Enqueue() {
	dir, err := os.MkdirTemp("", "idemrun-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	var creates atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		creates.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"pay_1"}`)
	}))
	defer target.Close()

	c, err := api.Open(filepath.Join(dir, "idemrun.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx := context.Background()
	req := api.Request{
		Method: "POST",
		URL:    target.URL + "/payments",
		Header: []api.Header{{Name: "Content-Type", Value: "application/json"}},
		Body:   []byte(`{"amount":1000}`),
	}
	opts := api.EnqueueOptions{Key: "order-4711-payment"}
	first, err := c.Enqueue(ctx, req, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("enqueued:", first.Job.State, "existing:", first.Existing)

	// The same key with the same request finds the stored job.
	again, err := c.Enqueue(ctx, req, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("enqueued again:", again.Job.State, "existing:", again.Existing, "same job:", again.Job.ID == first.Job.ID)

	r, err := c.NewRunner(exampleRunner())
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Run(runCtx); err != nil {
		fmt.Println(err)
		return
	}

	j, err := c.GetByKey(ctx, "order-4711-payment")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("final:", j.State, "attempts:", j.Attempts, "answer:", answerOf(j))
	fmt.Println("creates at the target:", creates.Load())
	// Output:
	// enqueued: pending existing: false
	// enqueued again: pending existing: true same job: true
	// final: succeeded attempts: 1 answer: 201 {"id":"pay_1"}
	// creates at the target: 1
}

// The first answer is a 503, so the outcome is unknown: the target may have
// created the payment. The runner asks the status URL before any replay,
// finds the payment, and ends the job succeeded without sending the create
// again.
func ExampleEnqueueOptions_statusURL() {
	dir, err := os.MkdirTemp("", "idemrun-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	var creates, queries atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		creates.Add(1)
		// The payment is created, then a gateway loses the answer.
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /payments", func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		if r.URL.Query().Get("idempotency_key") != "order-4712-payment" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"id":"pay_2","status":"succeeded"}`)
	})
	target := httptest.NewServer(mux)
	defer target.Close()

	c, err := api.Open(filepath.Join(dir, "idemrun.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx := context.Background()
	_, err = c.Enqueue(ctx, api.Request{
		URL:  target.URL + "/payments",
		Body: []byte(`{"amount":2500}`),
	}, api.EnqueueOptions{
		Key:       "order-4712-payment",
		StatusURL: target.URL + "/payments?idempotency_key={key}",
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	r, err := c.NewRunner(exampleRunner())
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Run(runCtx); err != nil {
		fmt.Println(err)
		return
	}

	j, err := c.GetByKey(ctx, "order-4712-payment")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("final:", j.State, "attempts:", j.Attempts, "status queries:", j.StatusQueries, "settled by:", sourceOf(j))
	for _, ev := range j.History {
		switch ev.Kind {
		case "attempt":
			fmt.Println("history:", ev.Kind, ev.N, ev.HTTPStatus, ev.Class)
		case "status_query":
			fmt.Println("history:", ev.Kind, ev.N, ev.HTTPStatus, ev.Outcome)
		}
	}
	fmt.Println("creates at the target:", creates.Load(), "status queries at the target:", queries.Load())
	// Output:
	// final: succeeded attempts: 1 status queries: 1 settled by: status_query
	// history: attempt 1 503 unknown
	// history: status_query 1 200 found_succeeded
	// creates at the target: 1 status queries at the target: 1
}
