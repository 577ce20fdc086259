// Package bolt keeps idemrun's jobs in one embedded bbolt file: the
// default backend of store.Store, worked by one runner process at a time
// (the file is locked; other processes reach the jobs through that
// runner's admin socket). It is the only package that imports bbolt.
//
// # Layout
//
// The file has these buckets:
//
//	meta   schema version, application name and per-state counters
//	jobs   job id (16-byte UUIDv7, so inserts append) → versioned record
//	keys   idempotency key → job id (keys are unique while their job exists)
//	index  state byte | big-endian sort time | job id → empty
//	tombs  deletion time | job id → key: reservations of deleted jobs' keys
//	hosts  host → its traffic policy
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
// it; counters and indexes change in the same transaction. A commit whose
// fsync fails after its meta page was written fails the store as a whole
// (store.ErrFailed): the page cache may show what the disk does not hold.
//
// Beside the store: Compact rewrites a file without its free pages, and
// DB.Check verifies idemrun's invariants on a file that may be damaged,
// without crashing.
package bolt
