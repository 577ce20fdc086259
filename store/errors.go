package store

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors every backend returns for the same conditions, so callers test
// them with errors.Is whatever stores their jobs.
var (
	// ErrNotFound: no job has that id or key.
	ErrNotFound = errors.New("store: job not found")
	// ErrKeyConflict: the key belongs to a job with a different request.
	ErrKeyConflict = errors.New("store: idempotency key already used for a different request")
	// ErrIllegalTransition: the job is not in a state the change starts from.
	ErrIllegalTransition = errors.New("store: illegal state transition")
	// ErrFenced: a newer claim owns the job; the write came from a stale worker.
	ErrFenced = errors.New("store: stale claim")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrFailed: the backend takes no more writes, because what it would
	// acknowledge might not be durable (a bbolt commit whose meta page
	// was written but not synced, a file deleted or replaced while open).
	// Stop, check the storage, and open the store again.
	ErrFailed = errors.New("store: failed; no more writes are taken")
	// ErrLeaseLost: the runner's lease expired before it was renewed; its
	// running jobs may already be rescued by another runner, and its
	// writes to them are refused (ErrFenced).
	ErrLeaseLost = errors.New("store: runner lease lost")
	// ErrCommitUnknown: the connection to the database ended while a
	// write committed, so whether it was stored is not known. Writes that
	// carry their idempotency key are safe to send again.
	ErrCommitUnknown = errors.New("store: the write may or may not have committed")
	// ErrUnavailable: the database cannot be reached now (refused, reset,
	// restarting). Nothing was written; the operation may be tried again.
	ErrUnavailable = errors.New("store: database unavailable")
)

// KeyConflictError says which job holds a key.
type KeyConflictError struct {
	Key   string
	JobID string
	// Deleted is set when the job that used the key has ended and been
	// deleted by retention, and the key is still reserved.
	Deleted time.Time
}

func (e *KeyConflictError) Error() string {
	if !e.Deleted.IsZero() {
		return fmt.Sprintf("store: idempotency key %q was used by job %s, which ended and was deleted by retention (last update %s); the key stays reserved for the key retention period so the request is not sent twice; use a new key for a new request", e.Key, e.JobID, e.Deleted.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("store: idempotency key %q already used by job %s for a different request (method, URL, headers, body or key format differ); use a new key, or send the identical request", e.Key, e.JobID)
}

// Unwrap makes errors.Is(err, ErrKeyConflict) true.
func (e *KeyConflictError) Unwrap() error { return ErrKeyConflict }

// TransitionError says which transition was refused and why.
type TransitionError struct {
	JobID    string
	From, To State
	Why      string
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("store: job %s cannot go from %s to %s", e.JobID, e.From, e.To)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// ErrCorrupt is wrapped by errors from a file whose pages are damaged.
var ErrCorrupt = errors.New("store: database file is corrupt")

// DamagedNamesError reports recorded lists of sensitive names that do not
// decode. It matches ErrCorrupt with errors.Is.
type DamagedNamesError struct {
	Path            string
	Headers, Params bool // which lists are damaged
	Err             error
}

func (e *DamagedNamesError) Error() string {
	var which []string
	if e.Headers {
		which = append(which, "sensitive_headers")
	}
	if e.Params {
		which = append(which, "sensitive_params")
	}
	return fmt.Sprintf("store: %s: its recorded sensitive names (%s) do not decode: %v", e.Path, strings.Join(which, ", "), e.Err)
}

func (e *DamagedNamesError) Unwrap() error { return ErrCorrupt }

// NoPolicyError says a host has no policy of its own (UnsetHostPolicy).
// It matches ErrNotFound with errors.Is.
type NoPolicyError struct{ Host string }

func (e *NoPolicyError) Error() string {
	return fmt.Sprintf("store: host %s has no policy of its own", e.Host)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NoPolicyError) Is(target error) bool { return target == ErrNotFound }
