package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store"
)

// schemaAtVersion is a fresh schema migrated up to version v and a
// connection to its database, closed when the test ends.
func schemaAtVersion(t *testing.T, v int) (url, schema string, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url, schema = pgtest.Schema(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if err := migrateTo(ctx, conn, schema, v); err != nil {
		t.Fatalf("migrate to version %d: %v", v, err)
	}
	return url, schema, conn
}

// TestMigrateHostsFromVersion1: Migrate brings a version-1 schema with
// jobs in it to this version, and fills each job's host column as
// store.ClaimHost computes it (over more than one backfill page); the
// store then passes Check, which compares the column with the record.
func TestMigrateHostsFromVersion1(t *testing.T) {
	ctx := context.Background()
	url, schema, conn := schemaAtVersion(t, 1)
	if v, err := schemaVersion(ctx, conn, schema); err != nil || v != 1 {
		t.Fatalf("schema version = %d, %v; want 1", v, err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	job := func(key, url, statusURL string, st store.State) *store.Job {
		return &store.Job{ID: store.NewID(), Key: key, Fingerprint: "fp-" + key, State: st,
			Request: store.Request{Method: "POST", URL: url}, StatusURL: statusURL,
			MaxAttempts: 5, CreatedAt: now, UpdatedAt: now, NextRunAt: now, Deadline: now.Add(time.Hour)}
	}
	want := map[string]string{}
	var jobs []*store.Job
	add := func(j *store.Job, host string) {
		jobs = append(jobs, j)
		want[j.ID] = host
	}
	add(job("pending", "https://API.example.com:443/pay", "https://status.example.com/p/{key}", store.StatePending), "api.example.com")
	add(job("unknown", "https://api.example.com/pay", "http://Status.example.com:8080/p/{key}", store.StateUnknown), "status.example.com:8080")
	add(job("unknown-bare", "http://[::1]:9000/pay", "", store.StateUnknown), "[::1]:9000")
	add(job("done", "http://127.0.0.1:8080/x", "", store.StateSucceeded), "127.0.0.1:8080")
	for i := range 1500 {
		add(job(fmt.Sprintf("bulk-%d", i), fmt.Sprintf("http://h%d.example.com/x", i%7), "", store.StatePending), fmt.Sprintf("h%d.example.com", i%7))
	}
	tbl := pgx.Identifier{schema, "jobs"}.Sanitize()
	for _, j := range jobs {
		c, err := colsOf(j)
		if err != nil {
			t.Fatal(err)
		}
		// Version 1's insert: no host column, the record as JSON.
		args := c.insertArgs()[:9]
		args[8] = jsonRecord(t, j)
		if _, err := conn.Exec(ctx, `INSERT INTO `+tbl+` (id, key, state, next_run_ns, updated_ns, fence, attempts, owner, job)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(ctx, url, &Options{Schema: schema}); err == nil {
		t.Fatal("Open of a version-1 schema succeeded; want ErrNoSchema")
	}

	if err := Migrate(ctx, url, &Options{Schema: schema}); err != nil {
		t.Fatalf("Migrate from version 1: %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT id::text, host FROM `+tbl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var id, host string
		if err := rows.Scan(&id, &host); err != nil {
			t.Fatal(err)
		}
		got[id] = host
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d jobs after the migration; want %d", len(got), len(want))
	}
	bad := 0
	for id, h := range want {
		if got[id] != h && bad < 5 {
			bad++
			t.Errorf("job %s: host %q after the migration; want %q", id, got[id], h)
		}
	}
	db, err := Open(ctx, url, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	defer db.Close()
	if rep, err := db.Check(); err != nil || !rep.OK() || rep.Jobs != len(want) {
		t.Errorf("Check after the migration = %+v, %v; want %d jobs, no problems", rep, err, len(want))
	}
	// A host column that disagrees with its record (a write by an
	// idemrun of version 1 during a rolling upgrade) is reported.
	if _, err := conn.Exec(ctx, `UPDATE `+tbl+` SET host = '' WHERE id = $1`, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if rep, err := db.Check(); err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "column host") {
		t.Errorf("Check with a stale host column = %+v, %v; want that one problem", rep, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE `+tbl+` SET host = $2 WHERE id = $1`, jobs[0].ID, want[jobs[0].ID]); err != nil {
		t.Fatal(err)
	}
}
