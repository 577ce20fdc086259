package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/postgres"
)

// Exit codes: 0 success, 2 usage errors and invalid input (nothing
// written), 3 outcome unknown (a write reached a runner that never
// answered, even when sent again), 1 anything else.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitUnknown: a write reached a runner that gave no answer, twice;
	// it may or may not have been done, and the same keys are safe to use.
	exitUnknown = 3
)

// Main is the CLI. Every command is testable without os.Exit.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// usageError marks a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

type command struct {
	name    string
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"enqueue", "store a request durably with an idempotency key", (*Main).enqueue},
		{"list", "list jobs, newest first", (*Main).list},
		{"show", "show one job and its history", (*Main).show},
		{"stats", "count jobs by state", (*Main).stats},
		{"cancel", "cancel a pending job that cannot have had an effect", (*Main).cancel},
		{"retry", "send a failed job again (same key)", (*Main).retry},
		{"resolve", "end a needs_attention job as succeeded or failed", (*Main).resolve},
		{"host", "traffic policies per target host: list, set, unset, pause, resume", (*Main).host},
		{"run", "run the runner: send due jobs, retry, query status", (*Main).run},
		{"watch", "live view of counts, rates and jobs needing a person", (*Main).watch},
		{"ui", "serve the web dashboard on TCP (for Postgres, or a file no runner holds)", (*Main).ui},
		{"backup", "write a consistent copy of the database", (*Main).backup},
		{"check", "verify a database file (bbolt and idemrun invariants)", (*Main).check},
		{"compact", "rewrite the database without its free pages (runner stopped)", (*Main).compact},
		{"demo", "see the promise hold: fake target, faults, kill -9, zero duplicates", (*Main).demo},
		{"bench", "measure enqueue and worked jobs/s against a loopback target", (*Main).bench},
		{"migrate", "create or upgrade idemrun's schema in a Postgres database", (*Main).migrate},
	}
}

// Run runs one command and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if len(args) == 0 {
		// A usage error, like an unknown command: the usage goes to stderr.
		m.usage(m.Stderr)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		m.usage(m.Stdout)
		return exitOK
	}
	if scrub := urlSecrets(args, m.Getenv); scrub != nil {
		mm := *m
		mm.Stderr = scrubWriter{w: m.Stderr, scrub: scrub}
		m = &mm
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(m, ctx, args[1:])
			return m.report(err)
		}
	}
	fmt.Fprintf(m.Stderr, "idemrun: unknown command %q\n", args[0])
	m.usage(m.Stderr)
	return exitUsage
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprintln(w, "usage: idemrun COMMAND [flags]   (idemrun COMMAND --help for its flags)")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "--db defaults to $IDEMRUN_DB, else ./idemrun.db: a bbolt file, or a postgres:// URL.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit status: 0 success; 2 usage error or invalid input, nothing written (a --db that")
	fmt.Fprintln(w, "is not an idemrun database or is locked, a Postgres URL that cannot be opened);")
	fmt.Fprintln(w, "3 outcome unknown: a write reached a runner that never answered, twice (the keys")
	fmt.Fprintln(w, "printed are safe to enqueue again); 1 anything else (a key conflict, a failed check).")
}

// report prints err and maps it to an exit code.
func (m *Main) report(err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	var ue *usageError
	var se *silentError
	switch {
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue), errors.Is(err, api.ErrInvalid):
		fmt.Fprintf(m.Stderr, "idemrun: %s%s\n", withHint(err), flagHint(err))
		return exitUsage
	case errors.Is(err, bolt.ErrNotDatabase), errors.Is(err, bolt.ErrNewerSchema), errors.Is(err, bolt.ErrLocked), errors.As(err, new(*dbOpenError)):
		// Bad input in the foundation issue's list: a path that is not an
		// idemrun database, or one another process holds (nothing written).
		fmt.Fprintf(m.Stderr, "idemrun: %s\n", withHint(err))
		return exitUsage
	case errors.As(err, new(*stoppedError)):
		fmt.Fprintf(m.Stderr, "idemrun: %s\n", withHint(err))
		return exitFailure
	case outcomeUnknown(err):
		fmt.Fprintf(m.Stderr, "idemrun: %s\n", withHint(err))
		return exitUnknown
	default:
		fmt.Fprintf(m.Stderr, "idemrun: %s\n", withHint(err))
		return exitFailure
	}
}

// outcomeUnknown reports whether err leaves a write's outcome unknown: a
// runner that never answered, or a database connection that ended during
// the commit.
func outcomeUnknown(err error) bool {
	return errors.Is(err, api.ErrOutcomeUnknown) || errors.Is(err, api.ErrCommitUnknown)
}

// stoppedError is a runner that stopped on an error: exit 1, whatever
// it wraps (a write of the runner whose outcome is unknown is not an
// enqueue's exit 3; the runner recovers it when it starts again).
type stoppedError struct{ err error }

func (e *stoppedError) Error() string { return e.err.Error() }
func (e *stoppedError) Unwrap() error { return e.err }

// silentError carries an exit code for a failure already printed.
type silentError struct{ code int }

func (e *silentError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// flags returns a flag set for a command, with --db.
func (m *Main) flags(name, usage string) (*pflag.FlagSet, *string) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "usage: idemrun %s %s\n\n", name, usage)
		fs.PrintDefaults()
	}
	db := fs.String("db", "", "database: a bbolt file or a postgres:// URL (default $IDEMRUN_DB, else ./idemrun.db)")
	fs.String("schema", "", "Postgres schema of idemrun's tables, with a postgres:// --db (default $IDEMRUN_SCHEMA, else idemrun)")
	return fs, db
}

// dbTarget is the database a command works on: a bbolt file or a
// Postgres URL, and the schema for a URL.
type dbTarget struct {
	path   string
	schema string // "" for the default
}

// isURL reports whether the target is a Postgres database.
func (t dbTarget) isURL() bool { return api.IsURL(t.path) }

// String is the target as messages show it: a URL's password masked.
func (t dbTarget) String() string {
	s := api.Redacted(t.path)
	if t.schema != "" {
		s += " (schema " + t.schema + ")"
	}
	return s
}

// options returns o with the target's schema set.
func (t dbTarget) options(o *api.Options) *api.Options {
	if t.isURL() {
		o.Postgres = &postgres.Options{Schema: t.schema}
	}
	return o
}

// db returns the database that --db, $IDEMRUN_DB or the default names,
// with --schema or $IDEMRUN_SCHEMA. A schema given for a bbolt file is
// refused: it would be ignored.
func (m *Main) db(fs *pflag.FlagSet, flag string) (dbTarget, error) {
	t := dbTarget{path: m.dbPath(flag)}
	if f := fs.Lookup("schema"); f != nil && f.Value.String() != "" {
		t.schema = f.Value.String()
	} else {
		t.schema = m.Getenv("IDEMRUN_SCHEMA")
	}
	if !t.isURL() && fs.Changed("schema") {
		return t, &api.InvalidError{Field: "schema", Value: fmt.Sprintf("%q", t.schema), Accepted: "a schema name with a postgres:// --db (a bbolt file has no schemas)"}
	}
	if !t.isURL() {
		t.schema = ""
	}
	return t, nil
}

// dbOpenError is a Postgres database that could not be opened: a URL
// that does not parse, a server that does not answer, a refused login, a
// missing database or schema. Nothing was written (exit 2).
type dbOpenError struct{ err error }

func (e *dbOpenError) Error() string { return e.err.Error() }
func (e *dbOpenError) Unwrap() error { return e.err }

// workerFlags are the runner's concurrency and client flags, shared by run
// and bench.
type workerFlags struct {
	workers, maxConns *int
	transport         *string
}

func addWorkerFlags(fs *pflag.FlagSet, workers int, usage string) workerFlags {
	return workerFlags{
		workers:   fs.Int("workers", workers, usage+" (1-10000)"),
		maxConns:  fs.Int("max-conns-per-host", 0, fmt.Sprintf("most connections to one target host; more attempts wait for one (default min(workers, %d); -1 no limit)", runner.DefaultMaxConnsPerHost)),
		transport: fs.String("http-transport", "runner", "HTTP client transport: runner (idemrun's own HTTP/1.1 transport) or net/http (Go's standard one)"),
	}
}

// netHTTP reports whether --http-transport asks for net/http's Transport.
func (w workerFlags) netHTTP() bool { return *w.transport == "net/http" }

func (w workerFlags) check() error {
	if *w.workers < 1 || *w.workers > 10000 {
		return &api.InvalidError{Field: "workers", Value: fmt.Sprint(*w.workers), Accepted: "an integer from 1 to 10000"}
	}
	if *w.maxConns < -1 || *w.maxConns > 10000 {
		return &api.InvalidError{Field: "max-conns-per-host", Value: fmt.Sprint(*w.maxConns), Accepted: "-1 (no limit), 0 (the default) or an integer up to 10000"}
	}
	if t := *w.transport; t != "runner" && t != "net/http" {
		return &api.InvalidError{Field: "http-transport", Value: t, Accepted: "runner or net/http"}
	}
	return nil
}

func (m *Main) parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		if ive, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
			if accepted, ok := acceptedByType[ive.GetFlag().Value.Type()]; ok {
				return &api.InvalidError{Field: ive.GetFlag().Name, Value: fmt.Sprintf("%q", ive.GetValue()), Accepted: accepted}
			}
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// acceptedByType says what a flag of each pflag value type takes, for the
// error a value that does not parse gets.
var acceptedByType = map[string]string{
	"duration":    "a duration such as 500ms, 30s, 5m or 2h",
	"int":         "an integer",
	"uint64":      "a non-negative integer",
	"float64":     "a number such as 0.05",
	"bool":        "true or false",
	"intSlice":    "integers separated by commas, such as 503,502",
	"stringArray": "a string",
}

func (m *Main) dbPath(flag string) string {
	if flag != "" {
		return flag
	}
	if v := m.Getenv("IDEMRUN_DB"); v != "" {
		return v
	}
	return "idemrun.db"
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// sendAgainIfUnknown runs the write fn on *c. When the write reached a
// runner that gave no answer (killed or restarted mid-request), it may or
// may not have been done: fn runs once more on a client opened anew (the
// runner's successor, or the file itself), which is safe because every
// job fn enqueues carries its key from the first try; the jobs the first
// try stored come back as existing.
func sendAgainIfUnknown[T any](m *Main, db dbTarget, c **api.Client, fn func(*api.Client) (T, error)) (T, error) {
	res, err := fn(*c)
	if !outcomeUnknown(err) {
		return res, err
	}
	fmt.Fprintf(m.Stderr, "idemrun: warning: %v; sending it again\n", err)
	(*c).Close()
	again, oerr := m.openService(db, true)
	if oerr != nil {
		*c = nil
		return res, fmt.Errorf("%w; and reopening %s failed (%v): check with `idemrun list` or `idemrun show KEY` before enqueueing again", err, db, oerr)
	}
	*c = again
	res2, err2 := fn(again)
	if err2 != nil && !outcomeUnknown(err2) {
		// A definite refusal of the second try says nothing of the first,
		// which may have been done: the outcome stays unknown.
		return res2, fmt.Errorf("%w; sent again: %v", err, err2)
	}
	return res2, err2
}

// openService opens the database file, or, when a runner holds it, a
// client through the runner's admin socket beside it (api.Open chooses).
// create says whether a missing file may be created (only enqueue
// creates).
func (m *Main) openService(db dbTarget, create bool) (*api.Client, error) {
	if create {
		if err := dbDirError(db); err != nil {
			return nil, err
		}
	}
	opts := db.options(&api.Options{LockTimeout: 300 * time.Millisecond, MustExist: !create})
	c, err := m.open(db.path, opts)
	if err == nil {
		return c, nil
	}
	if db.isURL() {
		return nil, openDBError(db, err)
	}
	if !create && errors.Is(err, fs.ErrPermission) {
		// A file this user may only read can still be inspected.
		opts.ReadOnly = true
		if c, rerr := m.open(db.path, opts); rerr == nil {
			return c, nil
		}
	}
	return nil, err
}

// dbDirError is the refusal of a --db file that would be created in a
// directory that does not exist, or nil. The store's own error names the
// path twice and reads as damage; the fix is the directory.
func dbDirError(db dbTarget) error {
	if db.isURL() {
		return nil
	}
	dir := filepath.Dir(db.path)
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		return nil
	}
	why := dir + " does not exist"
	switch {
	case err == nil:
		why = dir + " is not a directory"
	case !errors.Is(err, fs.ErrNotExist):
		why = err.Error()
	}
	return &api.InvalidError{Field: "db", Value: fmt.Sprintf("%q", db.path), Accepted: "a file in an existing directory (" + why + "; create it, or give another --db)"}
}

// open is api.Open with its warnings to standard error, held until the
// open's outcome is known (heldWarnings).
func (m *Main) open(path string, opts *api.Options) (*api.Client, error) {
	hw := holdWarnings(m.Stderr)
	opts.Warn = hw
	c, err := api.Open(path, opts)
	hw.release(err)
	return c, err
}

// openDBError is the error of a Postgres database that did not open,
// with what to do about it. A canceled command is not bad input.
func openDBError(db dbTarget, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	if h := dbHint(db, err); h != "" {
		err = fmt.Errorf("%w; %s", err, h)
	}
	return &dbOpenError{err}
}

func stateNames(ss []string) ([]store.State, error) {
	var out []store.State
	for _, s := range ss {
		for _, part := range strings.Split(s, ",") {
			st, err := store.ParseState(strings.TrimSpace(part))
			if err != nil {
				return nil, &api.InvalidError{Field: "--state", Value: fmt.Sprintf("%q", part), Accepted: "pending, running, unknown, succeeded, failed, needs_attention, canceled"}
			}
			if !slices.Contains(out, st) { // a state named twice is listed once
				out = append(out, st)
			}
		}
	}
	return out, nil
}

func sortedStates(st api.Stats) []string {
	var names []string
	for _, s := range store.States() {
		names = append(names, string(s))
	}
	for k := range st {
		if _, err := store.ParseState(k); err != nil {
			names = append(names, k)
		}
	}
	return names
}
