// Package store keeps idemrun's jobs in an embedded bbolt file.
//
// It is the only package that imports bbolt. A job record holds the request
// exactly as it will be sent (method, URL, ordered headers, body), its
// idempotency key, its limits, its state and its history of attempts, status
// queries and manual actions.
//
// # Layout
//
// The file has four buckets:
//
//	meta   schema version and per-state counters
//	jobs   job id (16-byte UUIDv7, so inserts append) → versioned record
//	keys   idempotency key → job id (keys are unique while their job exists)
//	index  state byte | big-endian sort time | job id → empty
//
// The index orders each state's jobs by the time that matters for that state:
// next_run_at for pending and unknown (so due work is a range scan), the claim
// time for running (so recovery touches only running jobs) and updated_at for
// the end states (so retention sweeps are range scans too).
//
// # Writes
//
// Every write is an operation run by a single writer goroutine that commits
// many operations in one bbolt transaction (group commit) and acknowledges
// each caller only after the commit that holds its operation is on disk. If a
// batch fails as a whole, its operations are run again one by one, so one bad
// operation cannot fail its neighbours. Each state change is checked against
// the transition table (ARCHITECTURE.md §2) inside the transaction that makes
// it; counters and indexes change in the same transaction.
package store
