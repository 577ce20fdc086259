package statusquery

import (
	"context"
	"net/http"
)

// Outcome is what a status query learned about an attempt whose outcome was
// unknown. The runner maps it onto job states (ARCHITECTURE.md §2 and §5).
type Outcome string

const (
	// FoundSucceeded means the target knows the operation and it took effect:
	// the job becomes succeeded.
	FoundSucceeded Outcome = "found_succeeded"
	// FoundFailed means the target knows the operation and it failed (status
	// or state failed, declined, rejected, canceled, cancelled or error): the
	// job becomes failed with the body recorded.
	FoundFailed Outcome = "found_failed"
	// NotFound means the target has no operation under the key (404, 410, or
	// an empty list): the request may be replayed with the same key and bytes
	// if limits allow.
	NotFound Outcome = "not_found"
	// InProgress means the target is still working on the operation: query
	// again later, never replay.
	InProgress Outcome = "in_progress"
	// Duplicate means the target lists more than one operation for the key:
	// the job needs a person (needs_attention).
	Duplicate Outcome = "duplicate"
	// NoAnswer means the query taught nothing (timeout, transport error, 3xx,
	// 409, 429, 5xx, other 4xx, or an ambiguous body): query again with
	// backoff under the status budget, never replay.
	NoAnswer Outcome = "no_answer"
)

// Valid reports whether o is one of the six outcomes defined by this package.
// The zero Outcome is not valid.
func (o Outcome) Valid() bool {
	switch o {
	case FoundSucceeded, FoundFailed, NotFound, InProgress, Duplicate, NoAnswer:
		return true
	}
	return false
}

// Query is what the runner knows about a job when it asks for its status.
type Query struct {
	// JobID is the job's id; it replaces {id} in Template.
	JobID string
	// Key is the job's idempotency key; it replaces {key} in Template.
	Key string
	// JobMethod is the method of the job's side-effecting request.
	JobMethod string
	// JobURL is the URL of the job's request. HTTPChecker compares its origin
	// with the status URL's to decide whether auth headers may be forwarded.
	JobURL string
	// JobHeader holds the job's request headers. HTTPChecker forwards only
	// its auth headers, and only to the job's own origin.
	JobHeader http.Header
	// Template is the job's status URL template (see ValidateTemplate).
	Template string
}

// Answer is the result of one status query.
type Answer struct {
	// Outcome is what the query learned; always a valid Outcome when
	// returned by this package's checkers.
	Outcome Outcome
	// HTTPStatus is the status code of the answer, or 0 when none arrived.
	HTTPStatus int
	// Body is the answer's body, at most the checker's body limit.
	Body []byte
	// Truncated reports that the body was longer than the limit and Body
	// holds only its first part.
	Truncated bool
	// Detail is a short human reason, such as "404 not found",
	// `status "processing"`, "2 items", "timeout after 5s" or "not JSON".
	Detail string
	// Err is set when no usable answer arrived: a transport error, a
	// timeout, a body read error or an unusable template. Outcome is then
	// NoAnswer.
	Err error
}

// Checker asks a target whether an attempt took effect. Application code may
// implement it for targets whose status API differs from the HTTP protocol of
// HTTPChecker. Check must be safe for concurrent use, must honor ctx, and
// must return one of the package's outcomes; on doubt it returns NoAnswer.
type Checker interface {
	Check(ctx context.Context, q Query) Answer
}

// CheckerFunc adapts an ordinary function to the Checker interface.
type CheckerFunc func(ctx context.Context, q Query) Answer

// Check calls f(ctx, q).
func (f CheckerFunc) Check(ctx context.Context, q Query) Answer {
	return f(ctx, q)
}
