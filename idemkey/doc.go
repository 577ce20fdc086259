// Package idemkey generates, validates, formats and fingerprints the
// idempotency keys that idemrun sends with every attempt of a job.
//
// A job gets one key when it is enqueued (New, or a key the application
// supplies and Validate accepts) and keeps it for life: every attempt, and
// every replay after an unknown outcome, carries the same key in the
// Idempotency-Key header (HeaderName). FormatHeader writes the header value
// either as the bare key (FormatToken, the default, what Stripe-style APIs
// expect) or as a Structured Field string (FormatStructured, as the IETF
// draft-ietf-httpapi-idempotency-key-header specifies); ParseHeader reads
// both, for fake servers in tests.
//
// Fingerprint hashes what defines a request (method, URL, the meaningful
// headers and the body), so a store can tell whether a key is being reused
// for a different payload, the mistake the draft answers with 422.
//
// The package uses the standard library and github.com/google/uuid only.
package idemkey
