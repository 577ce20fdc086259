package api_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
)

// A first job, end to end: a store in a temporary directory, a target on
// 127.0.0.1, a runner embedded in the program, one payment enqueued
// under its key, and Wait until it has ended. README.md copies this
// body; a test keeps the two identical.
func Example() {
	// The target: creates a payment and answers 201.
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_1","key":%q}`, r.Header.Get("Idempotency-Key"))
	}))
	defer target.Close()

	dir, err := os.MkdirTemp("", "idemrun-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The jobs' store: a bbolt file (or a postgres:// URL).
	c, err := api.Open(filepath.Join(dir, "idemrun.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// A runner in this process; `idemrun run` is the same in its own.
	r, err := c.NewRunner(runner.Config{Workers: 4})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()

	res, err := c.Enqueue(ctx, api.Request{
		Method: "POST",
		URL:    target.URL + "/payments",
		Header: []api.Header{{Name: "Content-Type", Value: "application/json"}},
		Body:   []byte(`{"amount":1000}`),
	}, api.EnqueueOptions{
		Key:       "order-4711-payment", // the same key on every retry of yours
		StatusURL: target.URL + "/payments?idempotency_key={key}",
	})
	if err != nil {
		log.Fatal(err)
	}
	// The job is on disk now; enqueueing the same key again finds it.
	fmt.Println("enqueued:", res.Job.Key, res.Job.State)

	j, err := c.Wait(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ended:", j.State, "attempts:", j.Attempts)
	fmt.Println("answer:", j.Result.HTTPStatus, j.Result.Body)

	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	// Output:
	// enqueued: order-4711-payment pending
	// ended: succeeded attempts: 1
	// answer: 201 {"id":"pay_1","key":"order-4711-payment"}
}
