// Package api is what application code imports to use idemrun.
//
// Open a database, Enqueue side-effecting HTTP requests (each durable before
// Enqueue returns, with a persisted idempotency key), inspect them with Get,
// List and Stats, steer them with Cancel, Retry and Resolve, and embed a
// runner with client.NewRunner(cfg), which wires the client's redaction
// and host allowlist into it (runner.New over client.Store() wires
// neither). The admin HTTP API in this
// package serves the same operations to the CLI while a runner holds the
// file.
//
// Jobs are returned as *Job views: credentials in headers and URLs are
// redacted, bodies are not included.
package api
