package api_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/statusquery"
)

// A target without a status endpoint, whose records the application can
// read another way (here a map; a ledger's client library in life). A
// custom statusquery.Checker answers the runner's status queries from
// it: the create's answer is lost behind a 503, the checker finds the
// payment, and the job succeeds without a second create.
func ExampleClient_NewRunner_customChecker() {
	var mu sync.Mutex
	ledger := map[string]string{} // idempotency key → payment id
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ledger[r.Header.Get("Idempotency-Key")] = fmt.Sprintf("pay_%d", len(ledger)+1)
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable) // created, but the answer is lost
	}))
	defer target.Close()

	dir, err := os.MkdirTemp("", "idemrun-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := api.Open(filepath.Join(dir, "idemrun.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	if _, err := c.Enqueue(ctx, api.Request{URL: target.URL + "/payments", Body: []byte(`{"amount":500}`)},
		api.EnqueueOptions{Key: "order-4713-payment"}); err != nil {
		log.Fatal(err)
	}

	cfg := exampleRunner()
	cfg.Checker = statusquery.CheckerFunc(func(ctx context.Context, q statusquery.Query) statusquery.Answer {
		mu.Lock()
		id, ok := ledger[q.Key]
		mu.Unlock()
		if !ok {
			return statusquery.Answer{Outcome: statusquery.NotFound, Detail: "not in the ledger"}
		}
		return statusquery.Answer{Outcome: statusquery.FoundSucceeded, Detail: "ledger has " + id}
	})
	r, err := c.NewRunner(cfg)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	j, err := c.GetByKey(ctx, "order-4713-payment")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("final:", j.State, "attempts:", j.Attempts, "status queries:", j.StatusQueries)
	mu.Lock()
	fmt.Println("payments at the target:", len(ledger))
	mu.Unlock()
	// Output:
	// final: succeeded attempts: 1 status queries: 1
	// payments at the target: 1
}
