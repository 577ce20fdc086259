// Package statusquery implements the status protocol idemrun follows when an
// attempt's outcome is unknown (ARCHITECTURE.md §5).
//
// A timeout tells the client it got no answer in time, not that the server
// did nothing. So before a job whose last attempt may have taken effect is
// ever sent again, the runner asks the target: it expands the job's status
// URL template, sends GET on it, and reads the answer as one Outcome:
//
//	answer                                                outcome
//	404, 410                                              NotFound: replay (same key, same bytes) if limits allow
//	2xx, JSON status/state in {pending, processing,       InProgress: query again later
//	     in_progress, running, queued, accepted}
//	2xx, JSON status/state in {failed, declined,          FoundFailed: the job fails, body recorded
//	     rejected, canceled, cancelled, error}
//	2xx, JSON list (array, or "data" array), 0 items      NotFound
//	2xx, JSON list with more than 1 item                  Duplicate: needs_attention
//	2xx, JSON list with exactly 1 item                    that item read as an object below, else FoundSucceeded
//	2xx, JSON null; an object (or a list's one item)      NoAnswer: no evidence either way
//	     whose status/state is not_found, missing,
//	     unknown or none; an object with "data": null
//	     and no status word; a list whose one item is null,
//	     or has no status word and a "data" list
//	other 2xx (not JSON, empty, a scalar, an object)      FoundSucceeded: the job succeeds
//	2xx over the body cap                                 only what the prefix proves (a top-level
//	                                                        in-progress status/state: InProgress; a
//	                                                        top-level list's second item: Duplicate),
//	                                                        else NoAnswer
//	timeout, transport error, 1xx, 3xx, 409, 429,         NoAnswer: query again with backoff under the
//	     other 4xx, 5xx                                     status budget; never replay
//
// Rows are tried top to bottom. Status words compare trimmed and ASCII
// case-insensitively, with "-" and " " read as "_" ("InProgress" and
// "in progress" count as in_progress); member names compare ASCII
// case-insensitively. A status that is not a string (42, null, an object) is
// ignored. In a whole body, an object that names status, state or data
// twice is ambiguous and gives NoAnswer. Interpret is the pure function behind the table.
//
// HTTPChecker adds one rule on top: an HTML page (Content-Type text/html or
// application/xhtml+xml) is NoAnswer, whether it comes with a 2xx (a login
// page, a web app's catch-all route) or a 404/410 (a web server's or
// proxy's own page, not the status API saying the key is unknown).
//
// The template holds {key} (the idempotency key) and/or {id} (the job id), in
// the path or the query; ValidateTemplate says what is accepted and Expand
// escapes each value for the part of the URL it lands in.
//
// HTTPChecker is the default Checker. It never follows redirects, bounds
// every query by a timeout and every body by a cap, and forwards the job's
// auth headers only to the job's own origin (same scheme, host and port);
// no other job header is ever sent. Targets whose status API looks different
// plug in their own Checker, for example a CheckerFunc, returning the same
// outcomes.
package statusquery
