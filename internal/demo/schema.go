package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/api"
)

// newSchemaName returns a schema name no one uses: the demo's nodes must
// never work on jobs someone else enqueued, nor its cleanup drop them.
func newSchemaName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "idemrun_demo_" + hex.EncodeToString(b[:])
}

// createSchema creates schema, refusing one that exists: what the demo
// drops at the end must be what it created.
func createSchema(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("demo: connect to %s: %w", api.Redacted(url), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("demo: %s: %w", api.Redacted(url), err)
	}
	if exists {
		return &api.InvalidError{Field: "schema", Value: fmt.Sprintf("%q", schema),
			Accepted: "a schema that does not exist yet: the demo creates it, runs its nodes in it and drops it (leave --schema out for a fresh one)"}
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("demo: create schema %s in %s: %w", schema, api.Redacted(url), err)
	}
	return nil
}

// dropSchema drops the demo's schema and everything in it.
func dropSchema(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("demo: connect to %s: %w", api.Redacted(url), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("demo: drop schema %s in %s: %w", schema, api.Redacted(url), err)
	}
	return nil
}
