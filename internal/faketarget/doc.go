// Package faketarget is a small "payments" HTTP API with injectable faults,
// served on a real loopback listener (Start) or as an http.Handler (New and
// Handler) for httptest. It is the ground truth behind every "no duplicates"
// claim in idemrun: tests, the `idemrun demo` command and benchmarks send
// requests to it, then ask it what really happened (CreatesByKey, Duplicates,
// BodiesByKey, Requests) instead of trusting the client's view.
//
// # Endpoints
//
//   - POST /payments creates a payment. The body is capped at MaxBodyBytes
//     (413 above it) and the Idempotency-Key header is required (400
//     {"error":"missing Idempotency-Key"} without it; 400 when idemkey.ParseHeader
//     rejects it). With Config.Dedup on, a second request with the same key and
//     the same body gets the stored payment back (201, Idempotent-Replayed:
//     true), the same key with a different body gets 422, and the same key
//     while the first create is still in flight (a slow commit) gets 409. With
//     Dedup off every request that reaches the commit point creates a new
//     payment, which is how a non-deduplicating target produces duplicates.
//     A created payment is answered 201 with
//     {"id":"pay_<n>","key":...,"status":"succeeded","amount":...}, where
//     amount echoes the body's "amount" field when the body is a JSON object
//     that has one, and is absent otherwise.
//   - GET /payments/by-key/{key} is the status endpoint (StatusTemplate). The
//     key is the URL-escaped path segment, so a key holding "/" is sent as
//     %2F. It answers 200 with the payment when exactly one exists, 200
//     {"data":[...]} when more than one exists (a duplicate), 200
//     {"status":"processing","key":...} while a slow create is in flight and
//     none has committed, and 404 {"error":"not found"} otherwise.
//   - GET /stats answers the Stats as JSON.
//
// # Faults
//
// Faults holds a probability in [0,1] per fault kind, decided per request
// from a math/rand/v2 PCG source seeded with Config.Seed and guarded by a
// mutex, so a sequence of requests sent one at a time meets the same faults
// on every run. SetFaults and SetDedup change behaviour while requests run.
//
// # Waiting without sleeping
//
// WaitCreates, WaitTotalCreates and WaitInFlight block until the ground
// truth reaches a state, and CommitInFlight ends every slow create at once,
// so a test can hold a create "processing" with a long SlowCommitDelay and
// end it when it chooses instead of sleeping.
//
// # Close
//
// Close stops the listener, interrupts every wait (Latency, StatusHang,
// SlowCommitDelay) and returns once every handler and background goroutine has
// returned. A slow create that has not committed when Close starts is
// abandoned: it never commits, it is counted in Counters.Abandoned, and the
// ground truth does not change after Close returns.
package faketarget
