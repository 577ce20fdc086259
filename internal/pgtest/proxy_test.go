package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// TestProxyCutAfterCommit: through the proxy, queries pass unchanged;
// with cuts on, a COMMIT fails at the client and yet is committed at the
// server; with them off again, commits answer.
func TestProxyCutAfterCommit(t *testing.T) {
	url, schema := pgtest.Schema(t)
	p, err := pgtest.StartProxy(url, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	table := pgx.Identifier{schema, "t"}.Sanitize()
	through := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			t.Fatalf("connect through the proxy: %v", err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	c := through()
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+"; CREATE TABLE "+table+" (x int)"); err != nil {
		t.Fatal(err)
	}
	p.SetCutAfterCommit(1)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", 7); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatalf("a cut commit answered the client")
	}
	if p.Cuts() != 1 || p.Commits() != 1 {
		t.Errorf("cuts %d of %d commits, want 1 of 1", p.Cuts(), p.Commits())
	}
	direct, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())
	// The server may still be committing what it read before the cut.
	var n int
	for try := 0; try < 100; try++ {
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE x = 7").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n != 1 {
		t.Fatalf("the cut commit is not at the server (%d rows)", n)
	}
	p.SetCutAfterCommit(0)
	c2 := through()
	tx, err = c2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (8)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("commit with cuts off: %v", err)
	}
}
