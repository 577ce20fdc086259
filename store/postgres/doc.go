// Package postgres keeps idemrun's jobs in a Postgres database (12 or
// later), so that many runner processes, on many machines, share one
// store. DB implements store.Store and passes the contract suite
// (store/storetest) as store/bolt does.
//
// # Schema
//
// Every table lives in its own Postgres schema (Options.Schema, "idemrun"
// by default), beside an application's tables. Migrate creates it from
// the versioned SQL migrations embedded in this package and records each
// in idemrun_migrations; Open creates nothing and refuses a database
// without them (ErrNoSchema).
//
//	jobs        one row per job: the whole store.Job as JSON, and copies of
//	            the fields queries need (state, key, times, fence, attempts,
//	            owner); an index on (state, sort time, id) serves claims,
//	            lists, sweeps and rescues
//	key_tombs   keys of deleted jobs, reserved until a sweep's key cutoff
//	runners     runner leases
//	meta        the recorded sensitive names
//
// The JSON column keeps the schema stable while the runner's code changes
// Job's fields: only the columns that queries use are columns.
//
// # Concurrency
//
// Each operation is one transaction, committed before it returns. Claims
// lock due rows FOR UPDATE SKIP LOCKED, so claimers in any number of
// processes pass over each other's jobs; a finish writes only where the
// job's fence, attempt, owner, state and time are still its claim's, in
// the UPDATE's own WHERE clause; rescues take an advisory lock of the
// schema, one rescuer at a time. Sweeps try another: a node that finds
// a sweep under way elsewhere sweeps nothing (0, 0, nil), so retention
// on every node costs one node's work. Stats counts rows by state.
//
// # Times
//
// Every time is the caller's clock reading, passed in as the contract
// says (due jobs, lease expiry, sweeps), and runners on several machines
// must agree on it: DB implements store.Clock, and the runner and the api
// pass DB.Now, the database's clock as the handle knows it. It is the
// server's clock_timestamp() read at the midpoint of a round trip, plus
// the local monotonic time since, measured at Open and every
// Options.ClockRefresh: a node whose own clock is off neither expires a
// live lease nor fires a job early.
//
// # Wakeups
//
// A write that makes work due (Enqueue, EnqueueMany, EnqueueManyFunc,
// EnqueueTx, Retry) sends pg_notify on the schema's channel (Channel)
// inside its transaction, so listeners hear of it only if it commits. A
// handle sends at most one per few milliseconds; a commit inside that
// window is announced by a notification sent after it, so a burst wakes
// listeners a few times and its last job is never left to a poll.
// Wakeups (store.Wakeups) listens on a connection of its own, outside the
// pool, and makes it again when it is lost; its subscribers are woken
// after each reconnection, since notifications may have been missed.
// Behind a pooler in transaction mode (PgBouncer), which does not keep a
// session's LISTEN, set Options.PollOnly.
//
// # Faults
//
// Errors say what a caller may do. A connection that cannot be made (at
// Open, Migrate, or when the pool needs one) is a *ConnectError whose
// Problem is ErrAuth, ErrNoDatabase or store.ErrUnavailable. A connection
// lost before a transaction's COMMIT is store.ErrUnavailable: the server
// rolled it back, and the operation may be tried again. One lost at
// COMMIT, or during a write outside a transaction, is
// store.ErrCommitUnknown: it may have committed. Enqueueing the same job
// again is then safe, its key finds it if it was stored. No message
// holds the URL's password.
//
// # Outbox
//
// EnqueueTx and EnqueueManyTx enqueue inside an application's own pgx
// transaction, on any pool of the same database, so the job exists if
// and only if that transaction commits. Their statements run under a
// savepoint: a key conflict or a database error never aborts the
// caller's transaction.
package postgres
