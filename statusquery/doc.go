// Package statusquery implements the status protocol idemrun follows when an
// attempt's outcome is unknown (ARCHITECTURE.md §5).
//
// A timeout tells the client it got no answer in time, not that the server
// did nothing. So before a job whose last attempt may have taken effect is
// ever sent again, the runner asks the target: it expands the job's status
// URL template, sends GET on it, and reads the answer as one Outcome:
// FoundSucceeded, FoundFailed, NotFound (the only one that allows a
// replay), InProgress, Duplicate or NoAnswer. The one table of which
// answer gives which outcome is docs/status-protocol.md ("Status answers
// and their outcomes"); Interpret is the pure function behind it, and
// HTTPChecker adds its one rule on the Content-Type (an HTML page is
// NoAnswer). Their tests hold each row.
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
