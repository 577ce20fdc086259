package main

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
)

// jobsByOwner counts the env's jobs by the runner that claimed them last.
func (e *env) jobsByOwner() map[string]int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.db)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT owner, count(*) FROM `+pgx.Identifier{e.schema}.Sanitize()+`.jobs GROUP BY owner`)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var owner string
		var n int
		if err := rows.Scan(&owner, &n); err != nil {
			e.t.Fatal(err)
		}
		out[owner] = n
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Two runners on one database share a host's rate: the 50/s target with
// --rate 40/s gets at most 48 requests in any second and almost no 429,
// each runner sending about half.
func TestHostRateSharedByRunners(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	e.ok("migrate")
	tg := startTarget(t, faketarget.Faults{RateLimit: 50, RetryAfter: "1"})
	e.ok("host", "set", store.HostOf(tg.URL()), "--rate", "40/s")
	a := e.startRunner("--workers", "8", "--lease-ttl", "3s")
	defer a.stop(syscall.SIGTERM)
	b := e.startRunner("--workers", "8", "--lease-ttl", "3s")
	defer b.stop(syscall.SIGTERM)
	time.Sleep(1500 * time.Millisecond) // each reads the other's lease within a policy reload
	start := time.Now()
	e.enqueueTo(tg.URL(), tg.StatusTemplate(), "n", 400, "")
	for deadline := start.Add(40 * time.Second); e.statsOf()["succeeded"] < 400; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("jobs by state %v after 40 s; want 400 succeeded", e.statsOf())
		}
	}
	took := time.Since(start)
	c := tg.Requests()
	share := float64(c.Faults.RateLimited429) / float64(c.Posts)
	peak := tg.MaxPostsPerSecond()
	owners := e.jobsByOwner()
	var per []int
	for _, n := range owners {
		per = append(per, n)
	}
	slices.Sort(per)
	t.Logf("two runners, --rate 40/s: %d requests in %s (%.1f/s), %d answered 429 (%.1f%%), at most %d in one second; jobs per runner %v (%.1f/s and %.1f/s)",
		c.Posts, took.Round(10*time.Millisecond), float64(c.Posts)/took.Seconds(), c.Faults.RateLimited429, 100*share, peak, per,
		float64(per[0])/took.Seconds(), float64(per[len(per)-1])/took.Seconds())
	e.wantAllSucceeded(400)
	if n := tg.TotalCreates(); n != 400 || len(tg.Duplicates()) != 0 {
		t.Errorf("%d creates at the target, duplicates %v; want 400, none", n, tg.Duplicates())
	}
	if share > 0.02 {
		t.Errorf("%.1f%% of requests answered 429, want at most 2%%", 100*share)
	}
	if peak > 48 {
		t.Errorf("%d requests in one second, want at most 48: the runners do not share the rate", peak)
	}
	if len(per) != 2 || per[0] < 120 {
		t.Errorf("jobs per runner %v; want two runners sending about half each", owners)
	}
}
