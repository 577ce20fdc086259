// Package runner sends stored jobs and decides what happens next.
//
// An application embeds one with api.Client.NewRunner (the api package's
// Example shows it), which wires the client's redaction and host
// allowlist in; `idemrun run` is the same runner in a process of its own.
// Config's fields and their defaults are every knob; how each attempt is
// classified and each status answer read is docs/status-protocol.md.
//
// A Runner claims due jobs through its Store's due index, records "attempt N
// started" durably before the first byte of attempt N leaves the process
// (write-ahead attempt), sends the stored request with its idempotency key
// and byte-identical method, URL, headers and body, classifies what happened
// (ARCHITECTURE.md §3), and writes the outcome: succeeded, failed, a retry at a
// backoff or Retry-After time, or unknown. An unknown job is never sent again
// blindly: the runner asks the target's status endpoint (package
// statusquery) and replays only on a definite "not found", or, without a
// status endpoint, only inside the target's key TTL. Otherwise the job is
// parked as needs_attention with a reason a person can act on.
//
// On start, every job a crash left running becomes unknown: its attempt may
// have reached the server.
//
// A fixed pool of Workers goroutines works the jobs. Idle slots are filled
// by claim rounds (pending jobs first, then unknown ones whose status query
// is due). A busy worker does not give its slot back: the write of its
// job's outcome also claims its next due job, pending or unknown, earliest
// next_run_at first, in the same commit (store.Work.FinishClaim with a NextClaim), so a
// worker waits for one commit per job, not two. Claims are compare and
// swap on the stored record, so a round and a chained claim never take the
// same job. Once Run is stopping, outcome writes claim nothing more.
//
// A store that commits outcomes later (store.FinishLater: Postgres) takes
// a worker's outcome without making it wait for the commit, and the
// worker's next job comes from claim rounds made ahead: the runner holds
// up to Workers+ClaimAhead jobs claimed and not yet sent, each claim
// committed before its job is handed out. A
// job ends (its slot, the hooks, Run's wait) when its outcome's commit is
// acknowledged; an outcome lost to a crash leaves the job running under
// its claim, to be rescued into unknown and asked about.
//
// Attempts go out through the runner's own HTTP/1.1 transport (internal/h1),
// which sends each request once and never again: it has no retry path. Go's
// http.Transport (used for proxied requests, or for all with
// Config.NetHTTP) resends a request on a reused connection by itself when it
// thinks the request is replayable, and it counts a request carrying an
// Idempotency-Key header as replayable; the runner builds every request with
// a body that cannot be rewound (no GetBody), so that transport never
// resends it either: each send is exactly one attempt in the store.
// Redirects are not followed.
package runner
