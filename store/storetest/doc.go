// Package storetest is the contract test suite of idemrun's job store.
//
// Run drives any backend through the same behaviour tests, in the manner of
// River's riverdrivertest: store/bolt and store/postgres run it
// unchanged, and so must any new backend (ARCHITECTURE.md §9). It covers every method of the Store
// and Hosts interfaces with the behaviour their documentation states
// (EveryMethod fails when a method has no test), and nothing a backend is
// free to choose; a backend without Hosts yet skips the host cases. The
// suite uses only the Store interface, explicit times (no clock) and
// seeded randomness, so every run gives the same answer.
//
// Behaviour that belongs to one backend (reopening a file, lock files, file
// modes, commit hooks) is tested next to that backend, not here.
package storetest
