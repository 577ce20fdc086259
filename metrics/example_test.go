package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/metrics"
)

// The metrics of a store, served as `idemrun run` serves them at
// /metrics: here the jobs by state after one enqueue.
func ExampleNew() {
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
	if _, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:9/payments"},
		api.EnqueueOptions{Key: "order-1"}); err != nil {
		log.Fatal(err)
	}

	srv := httptest.NewServer(metrics.New(c.Store()).Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "idemrun_jobs{") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// idemrun_jobs{state="canceled"} 0
	// idemrun_jobs{state="failed"} 0
	// idemrun_jobs{state="needs_attention"} 0
	// idemrun_jobs{state="pending"} 1
	// idemrun_jobs{state="running"} 0
	// idemrun_jobs{state="succeeded"} 0
	// idemrun_jobs{state="unknown"} 0
}
