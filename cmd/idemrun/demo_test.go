package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bad demo flags are usage errors: exit 2 naming the flag, refused before
// any target or runner starts.
func TestDemoBadFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--workers", "0"}, "invalid workers"},
		{[]string{"demo", "--workers", "-3"}, "invalid workers"},
		{[]string{"demo", "--latency", "-5s"}, "invalid latency"},
		{[]string{"demo", "--db", e.db}, "invalid db"},
		{[]string{"demo", "--jobs", "10", "junk"}, "unexpected argument"},
		{[]string{"demo", "--nodes", "0"}, "invalid nodes"},
		{[]string{"demo", "--nodes", "3"}, "invalid nodes"},
		{[]string{"demo", "--nodes", "3", "--db", e.db}, "invalid db"},
		{[]string{"demo", "--schema", "idemrun_demo_x"}, "invalid schema"},
	} {
		r := e.run(c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%v: got\n%s\nwant exit 2 naming %s and nothing on stdout", c.args, r, c.want)
		}
		if r.took > 5*time.Second {
			t.Errorf("%v took %s to refuse, want quick", c.args, r.took)
		}
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("refused demo created %s (stat err %v)", e.db, err)
	}
}

// The demo enqueues its jobs in kills+1 waves, one per runner life: fewer
// jobs than that would leave killed runners with nothing in flight, and
// its "runner SIGKILLs" line would count kills that proved nothing.
func TestDemoRefusesFewerJobsThanLives(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("demo", "--jobs", "2", "--kills", "3"); r.code != 2 || !strings.Contains(r.stderr, "kills+1") {
		t.Errorf("demo --jobs 2 --kills 3: got\n%s\nwant exit 2 asking for at least kills+1 jobs", r)
	}
	if r := e.run("demo", "--chaos", "--jobs", "5"); r.code != 2 || !strings.Contains(r.stderr, "= 21") {
		t.Errorf("demo --chaos --jobs 5: got\n%s\nwant exit 2: --chaos means 20 kills, so at least 21 jobs", r)
	}
}

// Several nodes need a database they can share: without a postgres://
// --db, --nodes above 1 is refused naming the flag, the value and what
// is accepted.
func TestDemoNodesNeedPostgres(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("demo", "--nodes", "3")
	if r.code != 2 || !strings.Contains(r.stderr, "invalid nodes 3") || !strings.Contains(r.stderr, "postgres://") {
		t.Errorf("demo --nodes 3: got\n%s\nwant exit 2 naming nodes, 3 and a postgres:// --db", r)
	}
}

// The demo on a Postgres database: --db and --schema reach it, two nodes
// share the schema, the verdict passes, and the schema it created is
// gone at the end.
func TestDemoPostgres(t *testing.T) {
	e := pgEnv(t)
	r := e.runProc("demo", "--db", e.db, "--schema", e.schema, "--nodes", "2", "--jobs", "40", "--kills", "1", "--workers", "4")
	if r.code != 0 || !strings.Contains(r.stdout, "PASS") || !strings.Contains(r.stdout, "2 nodes on one Postgres database") {
		t.Fatalf("demo on Postgres: want exit 0 and a PASS with 2 nodes, got:\n%s", r)
	}
	if e.schemaExists() {
		t.Errorf("the demo left its schema %s behind", e.schema)
	}
}

// The demo only runs in a schema it creates: one that exists (it may
// hold someone's jobs, which the demo's nodes would send, and its
// cleanup would drop) is refused with exit 2 naming the flag.
func TestDemoRefusesExistingSchema(t *testing.T) {
	e := pgEnv(t)
	e.exec("CREATE SCHEMA " + pgx.Identifier{e.schema}.Sanitize() + "; CREATE TABLE " + pgx.Identifier{e.schema, "orders"}.Sanitize() + " (id int)")
	before := e.relations()
	r := e.runProc("demo", "--db", e.db, "--schema", e.schema, "--nodes", "2", "--jobs", "10", "--kills", "1")
	if r.code != 2 || !strings.Contains(r.stderr, "invalid schema") || !strings.Contains(r.stderr, "does not exist yet") {
		t.Errorf("demo in an existing schema: want exit 2 naming schema, got:\n%s", r)
	}
	if after := e.relations(); !slices.Equal(after, before) {
		t.Errorf("the existing schema now holds %v, before it held %v", after, before)
	}
}
