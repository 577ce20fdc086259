// Package e2e holds idemrun's end-to-end acceptance tests of the
// unknown-outcome path (ARCHITECTURE.md §2, §3 and §5): a real bbolt file opened
// through package api, a real runner, and real HTTP targets on 127.0.0.1 —
// the fault-injecting payments server of internal/faketarget, or small
// scripted handlers where it lacks a behaviour. Every claim about duplicates
// is checked where it happens, at the target (creates per key, requests
// received, bytes received), not only in the job's own record. The package
// has no non-test code besides this comment.
package e2e
