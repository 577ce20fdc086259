package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// TestMain starts one throwaway Postgres server for the package's tests
// that need one (or uses IDEMRUN_TEST_POSTGRES).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// benchSchemas lists the schemas a bench may have left on the server.
func benchSchemas(t *testing.T, url string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'idemrun_bench_%'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// The bench on Postgres fills every figure, its ceilings and ratios
// included, sends each job exactly once, and leaves no schema behind.
func TestRunPostgresSmall(t *testing.T) {
	url := pgtest.URL(t)
	before := benchSchemas(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{Jobs: 200, Workers: 8, Producers: 4, Postgres: url, PGConns: 4})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Backend != "postgres" || res.PGConns != 4 {
		t.Errorf("backend %q, pg_conns %d; want postgres, 4", res.Backend, res.PGConns)
	}
	for name, v := range map[string]float64{
		"enqueue_jobs_per_s": res.EnqueueJobsPerS, "enqueue_many_jobs_per_s": res.EnqueueManyJobsPerS,
		"worked_jobs_per_s": res.WorkedJobsPerS, "enqueue_p50_ms": res.EnqueueP50Ms,
		"restart_to_first_send_ms": res.RestartToFirstSendMs, "http_ceiling_req_per_s": res.HTTPCeilingReqPerS,
		"pg_insert_commits_per_s_1conn": res.PGCommitsPerS1, "pg_insert_commits_per_s_pool": res.PGCommitsPerSPool,
		"pg_batch_insert_rows_per_s": res.PGBatchRowsPerS, "pg_wal_bytes_per_worked_job": res.PGWALBytesPerJob,
	} {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, rate := range []string{"enqueue_jobs_per_s", "enqueue_many_jobs_per_s", "worked_jobs_per_s"} {
		for _, ceil := range []string{"pg_insert_commits_per_s_1conn", "pg_insert_commits_per_s_pool", "pg_batch_insert_rows_per_s"} {
			if v := res.Ratios[rate+"/"+ceil]; !(v > 0) {
				t.Errorf("ratio %s/%s = %v, want > 0", rate, ceil, v)
			}
		}
	}
	if res.TargetRequestsReceived != 200 {
		t.Errorf("target received %d requests while working 200 jobs, want 200", res.TargetRequestsReceived)
	}
	if after := benchSchemas(t, url); len(after) != len(before) {
		t.Errorf("schemas before the bench %v, after %v: the bench left its schema behind", before, after)
	}
}

// A bench interrupted mid-run still drops its schema.
func TestRunPostgresCanceledDropsSchema(t *testing.T) {
	url := pgtest.URL(t)
	before := benchSchemas(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := writerFunc(func(p []byte) {
		if strings.HasPrefix(string(p), "Enqueue (") {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{Jobs: 20000, Workers: 8, Producers: 16, Postgres: url, PGConns: 4, Out: out})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the bench ended before the cancel; the test proves nothing")
		}
	case <-time.After(120 * time.Second):
		t.Fatal("the canceled bench did not return within 120 s")
	}
	if after := benchSchemas(t, url); len(after) != len(before) {
		t.Errorf("schemas before the bench %v, after %v: a canceled bench left its schema behind", before, after)
	}
}
