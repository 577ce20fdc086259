package admin_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
)

// The admin API in front of a client, as `idemrun run --admin` serves it:
// every request carries the bearer token; an enqueue answers 201 with the
// job, and the stats count it.
func ExampleHandler() {
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

	const token = "Zq8rT2vLx9mWc4Hs7Kd1Fp6Jb3Ng5Ye0"
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: token}))
	defer srv.Close()

	call := func(method, path, body string) (int, map[string]any) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
			log.Fatal(err)
		}
		return res.StatusCode, v
	}

	code, v := call("POST", "/v1/jobs", `{"url":"http://127.0.0.1:9/payments","key":"order-1","data":"{\"amount\":1000}","run_at":"10m"}`)
	job := v["job"].(map[string]any)
	fmt.Println("enqueue:", code, job["key"], job["state"])

	code, v = call("POST", "/v1/jobs", `{"url":"ftp://127.0.0.1/x"}`)
	fmt.Println("bad enqueue:", code, v["error"].(map[string]any)["code"])

	code, v = call("GET", "/v1/stats", "")
	fmt.Println("stats:", code, "pending", v["pending"])
	// Output:
	// enqueue: 201 order-1 pending
	// bad enqueue: 400 invalid_input
	// stats: 200 pending 1
}
