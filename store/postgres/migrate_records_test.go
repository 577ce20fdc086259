package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// TestMigrateRecordsFromVersion3: a job stored as JSON by a version-3
// schema is read back unchanged after the migration to binary records,
// with non-ASCII text, and its next write stores it in the binary
// encoding.
func TestMigrateRecordsFromVersion3(t *testing.T) {
	ctx := context.Background()
	url, schema, conn := schemaAtVersion(t, 3)
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	j := &store.Job{ID: store.NewID(), Key: "clé-1", Fingerprint: "fp", State: store.StatePending,
		Request:     store.Request{Method: "POST", URL: "http://127.0.0.1:9/pay", Header: []store.HeaderField{{Name: "X-Note", Value: "naïve ✓"}}, Body: []byte{0, 1, 2}},
		MaxAttempts: 5, CreatedAt: now, UpdatedAt: now, NextRunAt: now, Deadline: now.Add(time.Hour)}
	c, err := colsOf(j)
	if err != nil {
		t.Fatal(err)
	}
	args := c.insertArgs()
	args[8] = jsonRecord(t, j)
	tbl := pgx.Identifier{schema, "jobs"}.Sanitize()
	if _, err := conn.Exec(ctx, `INSERT INTO `+tbl+` (`+jobCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, args...); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, url, &Options{Schema: schema}); err != nil {
		t.Fatalf("Migrate from version 3: %v", err)
	}
	db, err := Open(ctx, url, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	defer db.Close()
	got, err := db.Get(j.ID)
	if err != nil {
		t.Fatalf("Get of a JSON record after the migration: %v", err)
	}
	if got.Key != j.Key || got.Request.Header[0].Value != "naïve ✓" || string(got.Request.Body) != "\x00\x01\x02" || !got.CreatedAt.Equal(now) {
		t.Errorf("job after the migration = %+v; want %+v", got, j)
	}
	first := func() byte {
		var b []byte
		if err := conn.QueryRow(ctx, `SELECT job FROM `+tbl+` WHERE id = $1`, j.ID).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b[0]
	}
	if f := first(); f != '{' {
		t.Fatalf("record before any write starts with %q; want the JSON kept", f)
	}
	if _, err := db.Cancel(ctx, j.ID, now.Add(time.Second), "test", "moved"); err != nil {
		t.Fatal(err)
	}
	if f := first(); f == '{' {
		t.Errorf("record after a write is still JSON; want the binary encoding")
	}
	if got, err := db.Get(j.ID); err != nil || got.State != store.StateCanceled || got.Request.Header[0].Value != "naïve ✓" {
		t.Errorf("job after its write = %+v, %v", got, err)
	}
	if rep, err := db.Check(); err != nil || !rep.OK() {
		t.Errorf("Check = %+v, %v; want no problems", rep, err)
	}
}
