// Package store is idemrun's domain and the contract its storage
// backends implement.
//
// It holds the job (Job: the request exactly as it will be sent, its
// idempotency key, its limits, its state and its history of attempts,
// status queries and manual actions), the seven states and the table of
// legal transitions (Legal; ARCHITECTURE.md §2), the errors every backend
// returns (ErrNotFound, ErrKeyConflict, ErrIllegalTransition, ErrFailed,
// …), claims and their fences, runner leases, and the interface a backend
// implements: Store, which is Jobs (enqueue, read, list, steer), Work
// (claim, finish, recover, sweep), Hosts (traffic policies), Check and
// Close, with optional interfaces such as Backup and CommitObserver.
//
// Two backends implement it: store/bolt, one embedded bbolt file worked
// by one runner process, and store/postgres, one database shared by many
// runner nodes. Both pass the contract suite store/storetest. This
// package imports neither bbolt nor pgx; applications use it through
// package api, which opens a backend and wraps it.
package store
