package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemrun/idemrun/store"
)

// Problems a *ConnectError names, so a caller (the CLI) can say what to
// fix. A server that cannot be reached is store.ErrUnavailable.
var (
	// ErrAuth: the server refused the user: a wrong password, no
	// pg_hba.conf entry for it, or no right to connect to the database
	// (SQLSTATE 28P01, 28000, 42501). Trying again does not help.
	ErrAuth = errors.New("store: the database server refused the user or its password")
	// ErrNoDatabase: the database the URL names does not exist (SQLSTATE
	// 3D000). Trying again does not help.
	ErrNoDatabase = errors.New("store: the database named in the URL does not exist")
)

// ConnectError reports a connection to the database that could not be
// made, by Open, Migrate, or an operation whose pool needed a new
// connection. Its message is one line and never holds the URL's
// password.
type ConnectError struct {
	// Problem is what to fix: ErrAuth, ErrNoDatabase, or
	// store.ErrUnavailable (refused, unreachable, a host name that does
	// not resolve, a timeout, a server starting, stopping or full: it
	// may be tried again). It is nil for another refusal (TLS, a
	// parameter the server refused), which Err names.
	Problem error
	// Where is the URL without its password, and the schema.
	Where string
	// Err is the driver's error, its password removed.
	Err error
}

func (e *ConnectError) Error() string {
	msg := strings.Join(strings.Fields(e.Err.Error()), " ") // one line: a multi-host error has several
	switch e.Problem {
	case ErrAuth:
		return msg + " (the server refused the user or its password: check them in the URL, PGPASSWORD or .pgpass, and the role's right to connect)"
	case ErrNoDatabase:
		return msg + " (the database named in the URL does not exist: create it, or fix the URL)"
	case store.ErrUnavailable:
		return msg + " (the database server cannot be reached now: check the URL's host and port, and that the server runs)"
	}
	return msg
}

// Unwrap makes errors.Is see the Problem and the driver's error.
func (e *ConnectError) Unwrap() []error {
	if e.Problem == nil {
		return []error{e.Err}
	}
	return []error{e.Problem, e.Err}
}

// asConnectError returns err as a *ConnectError when it is the driver's
// failure to connect, and err otherwise. err's message must already be
// redacted.
func asConnectError(err error, where string) error {
	var done *ConnectError
	var ce *pgconn.ConnectError
	if errors.As(err, &done) || !errors.As(err, &ce) {
		return err
	}
	var problem error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		switch {
		case pe.Code == "28P01" || pe.Code == "28000" || pe.Code == "42501":
			problem = ErrAuth
		case pe.Code == "3D000":
			problem = ErrNoDatabase
		case serverGone(pe):
			problem = store.ErrUnavailable
		}
	case netLost(err):
		problem = store.ErrUnavailable
	}
	return &ConnectError{Problem: problem, Where: where, Err: err}
}

// faultError marks an operation's error with what its caller may do:
// kind is store.ErrUnavailable (nothing was written; try again) or
// store.ErrCommitUnknown (the connection ended while a write committed).
type faultError struct {
	kind, err error
}

func (e *faultError) Error() string {
	if e.kind == store.ErrCommitUnknown {
		return e.err.Error() + " (the connection ended while the write committed: it may or may not be stored)"
	}
	return e.err.Error()
}

func (e *faultError) Unwrap() []error { return []error{e.kind, e.err} }

// classify marks err, from an operation on the database, with what its
// caller may do. commits says whether the statement that failed commits
// by itself (COMMIT, or a write outside a transaction): once it may have
// reached the server, a lost connection leaves its outcome unknown.
// Before that, nothing can have committed, and the server rolls back a
// transaction whose connection ends. Errors the server returned for the
// statement itself (a constraint, a serialization failure) are left as
// they are: nothing committed, and the same request would fail again.
func classify(err error, commits bool) error {
	if err == nil {
		return nil
	}
	var fe *faultError
	var ce *ConnectError
	var pce *pgconn.ConnectError
	if errors.As(err, &fe) || errors.As(err, &ce) || errors.As(err, &pce) {
		return err // classified already, or by asConnectError
	}
	var pe *pgconn.PgError
	lost := false
	if errors.As(err, &pe) {
		lost = serverGone(pe)
	} else {
		lost = netLost(err) || errors.Is(err, pgconn.ErrConnClosed)
	}
	// The driver reports a connection lost while it read the answer as
	// closed, which it also calls safe to retry: only an error before
	// anything was sent is.
	sent := !pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed)
	if commits && sent && (lost || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The caller's context ending during COMMIT closes the
		// connection too: the outcome is just as unknown.
		return &faultError{kind: store.ErrCommitUnknown, err: err}
	}
	if lost {
		return &faultError{kind: store.ErrUnavailable, err: err}
	}
	return err
}

// serverGone reports whether the server's error ends the session or says
// the server takes none now: the connection is gone, not the statement
// refused.
func serverGone(pe *pgconn.PgError) bool {
	switch {
	case pe.Severity == "FATAL" || pe.Severity == "PANIC":
		return true
	case strings.HasPrefix(pe.Code, "08"): // connection exception
		return true
	case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
		return true
	case pe.Code == "53300": // too many connections
		return true
	}
	return false
}

// netLost reports whether err is the network's: a refused or reset
// connection, an unreachable host, a name that does not resolve, an
// end of stream, or a timeout of the driver's. Not the caller's context.
func netLost(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
