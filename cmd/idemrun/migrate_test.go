package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// pgEnv is an env whose database is a fresh schema on the tests' Postgres
// server, not yet migrated.
func pgEnv(t *testing.T) *env {
	t.Helper()
	url, schema := pgtest.Schema(t)
	e := newEnv(t)
	e.db, e.schema = url, schema
	return e
}

// schemaExists reports whether the env's schema exists on its server.
func (e *env) schemaExists() bool {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.db)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", e.schema).Scan(&n); err != nil {
		e.t.Fatalf("schemata: %v", err)
	}
	return n == 1
}

// Before migrate, every command refuses the database with exit 2 and the
// command that fixes it, and creates nothing; migrate creates the schema,
// and running it again changes nothing.
func TestMigrate(t *testing.T) {
	e := pgEnv(t)
	for _, args := range [][]string{
		{"list"}, {"stats"}, {"show", "k"}, {"cancel", "k"},
		{"enqueue", "--url", "http://127.0.0.1:9/x", "--data", "{}"},
	} {
		r := e.run(args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "idemrun migrate") {
			t.Errorf("%s before migrate: want exit 2 naming idemrun migrate, got:\n%s", args[0], r)
		}
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s before migrate: want one line, got:\n%s", args[0], r.stderr)
		}
	}
	if r := e.runProc("run", "--until-idle"); r.code != exitUsage || !strings.Contains(r.stderr, "idemrun migrate") {
		t.Errorf("run before migrate: want exit 2 naming idemrun migrate, got:\n%s", r)
	}
	if e.schemaExists() {
		t.Fatalf("a command before migrate created schema %s", e.schema)
	}
	r := e.ok("migrate")
	if !strings.Contains(r.stdout, "schema "+e.schema+" is at version") {
		t.Errorf("migrate said:\n%s", r)
	}
	if !e.schemaExists() {
		t.Fatalf("migrate did not create schema %s", e.schema)
	}
	e.ok("migrate")
	if st := e.statsOf(); st["pending"] != 0 {
		t.Errorf("stats after migrate: %v", st)
	}
}

// migrate takes only a Postgres database: a bbolt file needs none.
func TestMigrateRefusesAFile(t *testing.T) {
	e := newEnv(t)
	r := e.run("migrate")
	if r.code != exitUsage || !strings.Contains(r.stderr, `invalid db`) || !strings.Contains(r.stderr, "postgres://") {
		t.Errorf("migrate on a file: want exit 2 naming db and postgres://, got:\n%s", r)
	}
}
