package api_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrun/idemrun/api"
)

// An order and the payment it calls for, in one transaction of the
// application's own pool: the payment job exists if and only if the
// order does. Runners on the same database send it once the transaction
// commits.
//
// It needs a Postgres database with the application's orders table, so
// go test compiles it and does not run it; enqueue_tx_test.go runs the
// same calls on a throwaway server.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL") // postgres://app@db.internal/shop
	if err := api.Migrate(ctx, url, nil); err != nil {
		log.Fatal(err)
	}
	jobs, err := api.Open(url, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer jobs.Close()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, amount) VALUES ($1, $2)", "o-1001", 2500); err != nil {
		log.Fatal(err)
	}
	_, err = jobs.EnqueueTx(ctx, tx, api.Request{
		Method: "POST",
		URL:    "https://payments.example.com/v1/charges",
		Header: []api.Header{{Name: "Content-Type", Value: "application/json"}},
		Body:   []byte(`{"order":"o-1001","amount":2500}`),
	}, api.EnqueueOptions{Key: "charge-o-1001", StatusURL: "https://payments.example.com/v1/charges?idempotency_key={key}"})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
