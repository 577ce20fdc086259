package bolt_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/bolt"
)

// A file filled through the Go API, checked and compacted with the
// runner stopped, as `idemrun check` and `idemrun compact` do.
func ExampleCompact() {
	dir, err := os.MkdirTemp("", "idemrun-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "idemrun.db")

	c, err := api.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Enqueue(context.Background(), api.Request{URL: fmt.Sprintf("http://127.0.0.1:9/payments/%d", i)},
			api.EnqueueOptions{Key: fmt.Sprintf("order-%d", i)}); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}

	db, err := bolt.Open(path, &bolt.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := db.Check()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("check:", rep.Jobs, "jobs, ok:", rep.OK())
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	res, err := bolt.Compact(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("compact:", res.Jobs, "jobs kept, smaller:", res.BytesAfter <= res.BytesBefore)
	// Output:
	// check: 3 jobs, ok: true
	// compact: 3 jobs kept, smaller: true
}
