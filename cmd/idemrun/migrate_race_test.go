package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/api"
)

// TestMigrateRace: processes that run idemrun migrate on a fresh schema
// at the same moment all exit 0, and the schema ends at the current
// version with each migration applied once. Several rounds, each on a
// schema of its own, so the processes meet at different points.
func TestMigrateRace(t *testing.T) {
	const rounds, racers = 4, 3
	for round := range rounds {
		e := pgEnv(t)
		results := raceProcs(t, e, racers, "migrate")
		for i, r := range results {
			if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("is at version %d", api.SchemaVersion)) {
				t.Errorf("round %d, migrate %d of %d racing: want exit 0 at version %d, got:\n%s", round, i+1, racers, api.SchemaVersion, r)
			}
		}
		versions := migrationsApplied(t, e)
		if len(versions) != api.SchemaVersion {
			t.Errorf("round %d: migrations recorded %v, want versions 1 to %d once each", round, versions, api.SchemaVersion)
		}
		for v, n := range versions {
			if n != 1 || v < 1 || v > api.SchemaVersion {
				t.Errorf("round %d: migration %d recorded %d times", round, v, n)
			}
		}
		// The schema works: a command that needs it runs.
		if st := e.statsOf(); st["pending"] != 0 {
			t.Errorf("round %d: stats after the race: %v", round, st)
		}
	}
}

// raceProcs starts n idemrun processes with args at once, as close
// together as starting them allows, and returns what each did.
func raceProcs(t *testing.T, e *env, n int, args ...string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	procs := make([]*proc, n)
	for i := range procs {
		p := &proc{cmd: exec.CommandContext(ctx, binPath, args...)}
		p.cmd.Dir, p.cmd.Env = e.dir, e.environ()
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		procs[i] = p
	}
	start := time.Now()
	for _, p := range procs {
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start idemrun %v: %v", args, err)
		}
	}
	out := make([]result, n)
	for i, p := range procs {
		err := p.cmd.Wait()
		out[i] = result{args: args, stdout: p.stdout.String(), stderr: p.stderr.String(), took: time.Since(start)}
		if ee, ok := err.(*exec.ExitError); ok {
			out[i].code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("idemrun %v: %v", args, err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("racing idemrun %v did not finish within %s: %v", args, cmdTimeout, out)
	}
	return out
}

// migrationsApplied counts, per version, the migrations recorded in the
// env's schema.
func migrationsApplied(t *testing.T, e *env) map[int]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.db)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT version FROM "+pgx.Identifier{e.schema, "idemrun_migrations"}.Sanitize())
	if err != nil {
		t.Fatalf("read the migrations of %s: %v", e.schema, err)
	}
	out := map[int]int{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out[v]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
