package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSchemaWithoutTables: a schema that exists but holds no idemrun
// tables (an application's own) is refused by enqueue, list and run with
// exit 2 naming idemrun migrate, whether --schema or IDEMRUN_SCHEMA names
// it, and nothing is created in it: its relations afterwards are the
// application's alone.
func TestSchemaWithoutTables(t *testing.T) {
	e := pgEnv(t)
	e.exec("CREATE SCHEMA " + pgx.Identifier{e.schema}.Sanitize() + "; CREATE TABLE " + pgx.Identifier{e.schema, "orders"}.Sanitize() + " (id bigint PRIMARY KEY)")
	before := e.relations()
	viaFlag := *e
	viaFlag.schema = ""
	for _, c := range []struct {
		e    *env
		proc bool
		args []string
	}{
		{e, false, []string{"enqueue", "--url", "http://127.0.0.1:9/x", "--data", "{}", "--key", "k1"}},
		{&viaFlag, false, []string{"enqueue", "--schema", e.schema, "--url", "http://127.0.0.1:9/x", "--data", "{}", "--key", "k1"}},
		{e, false, []string{"list"}},
		{&viaFlag, false, []string{"list", "--schema", e.schema}},
		{e, true, []string{"run", "--until-idle"}},
		{&viaFlag, true, []string{"run", "--until-idle", "--schema", e.schema}},
	} {
		var r result
		if c.proc {
			r = c.e.runProc(c.args...)
		} else {
			r = c.e.run(c.args...)
		}
		if r.code != exitUsage || !strings.Contains(r.stderr, "idemrun migrate") {
			t.Errorf("%s on a schema without idemrun tables: want exit 2 naming idemrun migrate, got:\n%s", c.args[0], r)
		}
		if after := e.relations(); !slices.Equal(after, before) {
			t.Fatalf("after %v the schema holds %v, before it held %v", c.args, after, before)
		}
	}
}

// exec runs sql on the env's server.
func (e *env) exec(sql string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.db)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// relations lists the names of every relation (tables, indexes,
// sequences, views) and type in the env's schema, sorted.
func (e *env) relations() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.db)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT relname FROM pg_class WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
		UNION ALL SELECT typname FROM pg_type WHERE typnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
		ORDER BY 1`, e.schema)
	if err != nil {
		e.t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return names
}
