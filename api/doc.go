// Package api is what application code imports to use idemrun.
//
// The package's Example is a whole first program: open a store, embed a
// runner, enqueue a request under its key, Wait for its end. The other
// examples settle an unknown outcome through a status URL, answer status
// queries with a custom checker, and enqueue inside the application's own
// Postgres transaction (EnqueueTx). The README introduces idemrun; the
// reference is in docs/.
//
// Open a database, Enqueue side-effecting HTTP requests (each durable before
// Enqueue returns, with a persisted idempotency key), inspect them with Get,
// List and Stats, steer them with Cancel, Retry and Resolve, and embed a
// runner with client.NewRunner(cfg), which wires the client's redaction
// and host allowlist into it (runner.New over client.Store() wires
// neither).
//
// One Client type serves every way to reach the jobs: the bbolt file
// itself, or, when a runner holds the file, that runner's admin API on
// the socket beside it (Open tries it first; DialSocket and DialTCP
// reach it alone). Through a runner, the operations that need the store
// itself (Check, Sweep, NewRunner) return ErrNotOffered. The client of
// the admin API lives here for that reason; its server is package admin,
// which imports this one. Metrics are package metrics: an application
// that imports api links neither the admin server nor Prometheus.
//
// Jobs are returned as *Job views: credentials in headers and URLs are
// redacted, bodies are not included.
package api
