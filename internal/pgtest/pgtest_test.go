package pgtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var ctx = context.Background()

// TestSchema: a test's schema is its own; it may be created and used.
func TestSchema(t *testing.T) {
	url, a := pgtest.Schema(t)
	_, b := pgtest.Schema(t)
	if a == b {
		t.Fatalf("two schemas named %s", a)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{a}.Sanitize()+"; CREATE TABLE "+pgx.Identifier{a, "t"}.Sanitize()+" (x int)"); err != nil {
		t.Fatal(err)
	}
}

// TestStartStop: a server started alone answers, and once stopped it
// answers no more.
func TestStartStop(t *testing.T) {
	pgtest.URL(t) // skips (or fails in CI) when there is no server
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("the tests use a server of their own: " + pgtest.EnvURL)
	}
	s, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 = %d, %v", one, err)
	}
	conn.Close(ctx)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(c, s.URL); err == nil {
		conn.Close(ctx)
		t.Errorf("the server still answers after Stop")
	}
}
