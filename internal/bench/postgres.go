package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/postgres"
)

// runPostgres is Run on a Postgres database: the same phases in a schema
// of the bench's own, and the database's ceilings measured in it first.
func runPostgres(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.PGConns <= 0 {
		cfg.PGConns = DefaultPGConns(cfg.Workers)
	}
	res := newResult(cfg, "postgres")
	res.PGConns = cfg.PGConns
	sc, err := newPGScratch(ctx, cfg.Postgres, cfg.PGConns)
	if err != nil {
		return nil, err
	}
	defer sc.drop()
	fmt.Fprintf(cfg.Out, "schema %s on %s (dropped at the end)\n", sc.schema, api.Redacted(cfg.Postgres))
	if err := pgCeilings(ctx, sc.pool, sc.schema, cfg.PGConns, res); err != nil {
		return nil, fmt.Errorf("bench: Postgres ceilings: %w", err)
	}
	fmt.Fprintf(cfg.Out, "Postgres single-row INSERT commits/s: %.0f (1 connection), %.0f (%d connections); COPY %d rows per transaction: %.0f rows/s\n",
		res.PGCommitsPerS1, res.PGCommitsPerSPool, cfg.PGConns, res.PGBatchRows, res.PGBatchRowsPerS)
	if res.HTTPCeilingReqPerS, err = httpCeiling(ctx, cfg, min(cfg.Jobs, 50000)); err != nil {
		return nil, fmt.Errorf("bench: HTTP ceiling: %w", err)
	}
	fmt.Fprintf(cfg.Out, "HTTP alone (%d senders, no store): %.0f req/s\n", cfg.Workers, res.HTTPCeilingReqPerS)

	tgt, err := startTarget()
	if err != nil {
		return nil, err
	}
	defer tgt.srv.Close()
	open := func() (client, error) {
		c, err := api.Open(cfg.Postgres, &api.Options{Postgres: &postgres.Options{Schema: sc.schema, MaxConns: int32(cfg.PGConns)}})
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		return apiClient{c}, nil
	}
	c, err := open()
	if err != nil {
		return nil, err
	}
	defer c.Close() // a second Close is a no-op

	// Batch enqueue first, then the table is emptied for the one-by-one
	// enqueue of the same keys.
	stop, err := cfg.profile("many")
	if err != nil {
		return nil, err
	}
	res.EnqueueManyJobsPerS, err = enqueueManyInto(ctx, c, tgt.url, cfg.Jobs)
	stop()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "EnqueueMany: %.0f jobs/s\n", res.EnqueueManyJobsPerS)
	if err := sc.truncate(ctx); err != nil {
		return nil, fmt.Errorf("bench: empty the EnqueueMany jobs: %w", err)
	}

	if err := oneByOne(ctx, cfg, tgt.url, c, res); err != nil {
		return nil, err
	}
	wal0, err := sc.walBytes(ctx)
	if err != nil {
		return nil, err
	}
	if err := work(ctx, cfg, c, tgt, res); err != nil {
		return nil, err
	}
	if wal1, err := sc.walBytes(ctx); err == nil {
		res.PGWALBytesPerJob = float64(wal1-wal0) / float64(cfg.Jobs)
	}
	fmt.Fprintf(cfg.Out, "Worked (%d workers, %d connections): %.0f jobs/s, %.0f WAL bytes/job, %.0f µs CPU/job\n", cfg.Workers, cfg.PGConns, res.WorkedJobsPerS, res.PGWALBytesPerJob, res.WorkCPUMicrosPerJob)

	latencies(ctx, c, res)
	if err := restart(ctx, cfg, tgt, c, open, res); err != nil {
		return nil, err
	}
	res.PeakRSSMiB = procStatusMiB("VmHWM:")
	res.RSSAnonMiB = procStatusMiB("RssAnon:")
	res.ratios(map[string]float64{
		"pg_insert_commits_per_s_1conn": res.PGCommitsPerS1,
		"pg_insert_commits_per_s_pool":  res.PGCommitsPerSPool,
		"pg_batch_insert_rows_per_s":    res.PGBatchRowsPerS,
	})
	return res, nil
}

// CheckPostgresURL refuses a URL pgx cannot read, without naming its
// password.
func CheckPostgresURL(s string) error {
	if _, err := pgx.ParseConfig(s); err != nil {
		return fmt.Errorf("bench: the Postgres URL %s does not parse", api.Redacted(s))
	}
	return nil
}

// DefaultPGConns is the bench's pool size for a runner of workers workers
// when Config.PGConns is zero: a worker holds a connection only for its
// claim or outcome transaction, so far fewer than one per worker keep the
// database busy, and each more backend costs the database's cores.
func DefaultPGConns(workers int) int { return min(workers, 32) }

// Ceiling durations: each database ceiling runs this long, and at most
// ceilingOps operations or rows.
const (
	ceilingTime = time.Second
	ceilingOps  = 2_000_000
	ceilingRows = 20_000_000
	batchRows   = 5000
)

// pgCeilings measures the database's own ceilings in a scratch table of
// the bench's schema: single-row INSERTs, each its own transaction
// (autocommit), on one connection and on conns connections at once; and
// rows/s of COPY, batchRows rows per transaction. The payload is about a
// job's record.
func pgCeilings(ctx context.Context, pool *pgxpool.Pool, schema string, conns int, res *Result) error {
	table := pgx.Identifier{schema, "bench_ceiling"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, payload bytea NOT NULL)`); err != nil {
		return err
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+table)
	payload := make([]byte, 600)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	insert := `INSERT INTO ` + table + ` (payload) VALUES ($1)`
	commits := func(n int) (float64, error) {
		var total atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		start := time.Now()
		end := start.Add(ceilingTime)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := pool.Acquire(ctx)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				defer c.Release()
				for time.Now().Before(end) && total.Load() < ceilingOps {
					if _, err := c.Exec(ctx, insert, payload); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					total.Add(1)
				}
			}()
		}
		wg.Wait()
		if e := firstErr.Load(); e != nil {
			return 0, e.(error)
		}
		return float64(total.Load()) / time.Since(start).Seconds(), nil
	}
	var err error
	if res.PGCommitsPerS1, err = commits(1); err != nil {
		return fmt.Errorf("single-row commits: %w", err)
	}
	if res.PGCommitsPerSPool, err = commits(conns); err != nil {
		return fmt.Errorf("single-row commits on %d connections: %w", conns, err)
	}
	rows := make([][]any, batchRows)
	for i := range rows {
		rows[i] = []any{payload}
	}
	n := 0
	start := time.Now()
	for time.Since(start) < ceilingTime && n < ceilingRows {
		got, err := pool.CopyFrom(ctx, pgx.Identifier{schema, "bench_ceiling"}, []string{"payload"}, pgx.CopyFromRows(rows))
		if err != nil {
			return fmt.Errorf("COPY: %w", err)
		}
		n += int(got)
	}
	res.PGBatchRowsPerS = float64(n) / time.Since(start).Seconds()
	res.PGBatchRows = batchRows
	return nil
}

// newSchemaName is a schema name no one uses: the bench creates it and
// drops it, with everything in it, when it ends.
func newSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "idemrun_bench_" + hex.EncodeToString(b[:])
}

// pgScratch is the bench's own schema on a Postgres database.
type pgScratch struct {
	url    string
	schema string
	pool   *pgxpool.Pool // the bench's own connections: ceilings, cleanup
}

// newPGScratch creates and migrates a fresh schema. It refuses a name
// already taken: a schema the bench did not create is never dropped.
func newPGScratch(ctx context.Context, dbURL string, conns int) (*pgScratch, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("bench: the Postgres URL %s does not parse", api.Redacted(dbURL))
	}
	cfg.MaxConns = int32(max(conns, 4))
	cfg.ConnConfig.RuntimeParams["application_name"] = "idemrun bench"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to %s: %v", api.Redacted(dbURL), err)
	}
	s := &pgScratch{url: dbURL, schema: newSchemaName(), pool: pool}
	// CREATE SCHEMA without IF NOT EXISTS: a name taken is an error here,
	// before the bench owns anything.
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: create schema %s on %s: %v", s.schema, api.Redacted(dbURL), err)
	}
	if err := postgres.Migrate(ctx, dbURL, &postgres.Options{Schema: s.schema}); err != nil {
		s.drop()
		return nil, fmt.Errorf("bench: %w", err)
	}
	return s, nil
}

// drop removes the bench's schema, also when the run's context is done.
func (s *pgScratch) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{s.schema}.Sanitize()+` CASCADE`)
	s.pool.Close()
	return err
}

// truncate empties the bench's tables between phases.
func (s *pgScratch) truncate(ctx context.Context) error {
	q := func(t string) string { return pgx.Identifier{s.schema, t}.Sanitize() }
	_, err := s.pool.Exec(ctx, `TRUNCATE `+q("jobs")+`, `+q("key_tombs")+`, `+q("runners")+`, `+q("host_traffic"))
	return err
}

// walBytes is the server's WAL position: its growth over a phase is the
// WAL the phase wrote (the whole server's, this bench's alone when no one
// else writes).
func (s *pgScratch) walBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n)
	return n, err
}
