package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// TestRestart: a crash-restart ends the sessions open at the time, keeps
// what was committed, drops what was not, and the server answers again at
// the same URL; RestartAfter keeps it down for its pause; an ended
// context bounds both. One server for all: each start costs an initdb.
func TestRestart(t *testing.T) {
	s := pgtest.Private(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	url := s.URL
	start := time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %s", time.Since(start).Round(time.Millisecond))
	if s.URL != url {
		t.Errorf("URL changed from %s to %s", url, s.URL)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Errorf("a transaction open across the crash committed")
	}
	c2, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	defer c2.Close(context.Background())
	var n, sum int
	if err := c2.QueryRow(ctx, "SELECT count(*), coalesce(sum(x), 0) FROM t").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 1 || sum != 1 {
		t.Errorf("after the crash t holds %d rows summing to %d, want the committed row alone", n, sum)
	}
	// Again, down for a pause: the server is Restart's own, and refuses
	// connections while down.
	restartAfter(t, ctx, s)
	// An ended context: Restart gives up instead of waiting on a server
	// that does not come back. The server may be down or up then; Stop
	// (the cleanup) copes with both.
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	if err := s.Restart(ended); err == nil {
		t.Errorf("Restart with an ended context returned nil")
	}
}

// restartAfter checks RestartAfter: the server is down for the pause,
// then answers again.
func restartAfter(t *testing.T, ctx context.Context, s *pgtest.Server) {
	t.Helper()
	const pause = 1500 * time.Millisecond
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.RestartAfter(ctx, pause) }()
	refused := false
	for try := 0; try < 30 && !refused; try++ {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		c, err := pgx.Connect(cctx, s.URL)
		ccancel()
		if err != nil {
			refused = true
			break
		}
		c.Close(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); !refused || took < pause {
		t.Errorf("refused a connection during the pause: %v; RestartAfter took %s, want at least %s", refused, took, pause)
	}
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("after the pause: %v", err)
	}
	c.Close(ctx)
}
