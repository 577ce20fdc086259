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
// schema, one rescuer at a time. Stats counts rows by state.
//
// # Times
//
// Every time is the caller's clock reading, passed in as the contract
// says (due jobs, lease expiry, sweeps): runners on several machines
// must agree on the time. The database's own clock is not used.
package postgres
