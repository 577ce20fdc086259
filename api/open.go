package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/internal/redact"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/postgres"
)

// Options configures Open. A nil *Options means all defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process's file lock.
	// Defaults to 2 seconds.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only (it must exist).
	ReadOnly bool
	// MustExist refuses to create a missing file.
	MustExist bool
	// Direct opens the store itself, never through the admin API of a
	// runner that holds it: for a runner and for tools that need the
	// store (Check, Sweep, NewRunner, Store). A file a runner holds is
	// then ErrLocked.
	Direct bool
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// SensitiveHeaders are shown redacted in addition to Authorization,
	// Proxy-Authorization, Cookie, Set-Cookie and X-Api-Key. They are
	// recorded in the database (unless it is opened read-only, or
	// through a runner that holds it), so every later open redacts them
	// too — the CLI, a runner's admin API and its logs — without being
	// told; a recorded name is never removed.
	SensitiveHeaders []string
	// SensitiveParams are URL query parameters shown redacted in addition to
	// api_key, token, access_token, signature and the like; recorded in the
	// database as SensitiveHeaders are.
	SensitiveParams []string
	// AllowHosts, when non-empty, limits targets to these hosts (exact, or
	// "*.example.com" for subdomains); link-local and metadata addresses
	// are refused. Defaults to any host.
	AllowHosts []string
	// DefaultMaxAttempts is a job's attempt limit when it gives none.
	// Defaults to 5.
	DefaultMaxAttempts int
	// DefaultDeadline is a job's deadline when it gives none. Defaults to
	// 15 minutes.
	DefaultDeadline time.Duration
	// DefaultAttemptTimeout is a job's attempt timeout when it gives none.
	// Defaults to 10 seconds.
	DefaultAttemptTimeout time.Duration
	// Store passes bbolt storage options through (fault hooks, batch
	// size).
	Store *bolt.Options
	// Postgres configures a postgres:// database: the schema that holds
	// idemrun's tables, the pool size, polling only.
	Postgres *postgres.Options
	// Warn receives warnings (e.g. a database file readable by others).
	// Defaults to standard error.
	Warn io.Writer
}

// Client is an open idemrun store: what application code uses to
// enqueue, inspect and steer jobs, and to embed a runner. It works on the
// store itself or, when a runner holds the store, through that runner's
// admin API (Open chooses); the operations are the same, except those
// that need the store itself (Check, Sweep, NewRunner), which return
// ErrNotOffered through a runner.
type Client struct {
	st    store.Store // nil through a runner's admin API
	rem   *remote     // nil on the store itself
	where string      // the file, socket or address, for messages
	opts  Options
	red   *redact.Redactor
	allow *hostAllow
	// notify, when set by a runner embedded in this process, wakes it after
	// an enqueue.
	notify func()
	// traffic, when a runner embedded in this process set it, returns its
	// figures of the hosts it sends to (Hosts).
	traffic func() []store.HostTraffic
	// lastTemplate is the status URL template parsed last (see template).
	lastTemplate atomic.Pointer[statusquery.Template]
	// changes wakes Wait after a write of this process.
	changes changes
}

// Open opens the idemrun database at path: a bbolt file, or a Postgres
// database when path is a postgres:// or postgresql:// URL (IsURL).
//
// A bbolt file is created when missing (unless Options.MustExist). When a
// runner holds the file and answers on its admin socket (SocketPath), the
// client works through the socket instead, without waiting for the
// file's lock: a socket beside the file usually means a runner holds it,
// so it is asked first. Set Options.Direct for the file alone.
//
// A Postgres database is shared by every process that opens it, runners
// included, so the client always works on it directly. Open creates
// nothing there: a database without idemrun's schema is refused with an
// error matching ErrNoSchema (Migrate creates it). No error names the
// URL's password.
func Open(path string, opts *Options) (*Client, error) {
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	o := &c.opts
	if IsURL(path) {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		db, err := postgres.Open(ctx, path, o.Postgres)
		if err != nil {
			return nil, err
		}
		if err := c.attach(db, o.ReadOnly, opts); err != nil {
			db.Close()
			return nil, err
		}
		return c, nil
	}
	if !o.Direct {
		if _, err := os.Stat(SocketPath(path)); err == nil {
			r, err := dialSocket(path)
			if err == nil {
				return c.through(r), nil
			}
			if errors.Is(err, errSocketRefused) {
				fmt.Fprintf(o.Warn, "idemrun: warning: %v; opening the file instead\n", err)
			}
		}
	}
	err = c.openFile(path)
	switch {
	case err == nil:
		return c, nil
	case o.Direct || !errors.Is(err, bolt.ErrLocked):
		return nil, err
	}
	// A runner that started after the first look may be up by now.
	r, rerr := dialSocket(path)
	if rerr != nil {
		return nil, fmt.Errorf("%w; its admin socket did not answer either (%v)", err, rerr)
	}
	return c.through(r), nil
}

// connectTimeout bounds Open's first connection to a database server
// that does not answer.
const connectTimeout = 15 * time.Second

// IsURL reports whether db names a Postgres database (a postgres:// or
// postgresql:// URL) rather than a bbolt file.
func IsURL(db string) bool {
	i := strings.Index(db, "://")
	if i < 0 {
		return false
	}
	scheme := strings.ToLower(db[:i])
	return scheme == "postgres" || scheme == "postgresql"
}

// Migrate creates idemrun's tables in the Postgres database at url (in
// the schema of opts.Postgres, "idemrun" by default), or brings them to
// this idemrun's version. It is idempotent, and safe when several
// processes run it at once. A bbolt file needs none: Open creates and
// upgrades it.
func Migrate(ctx context.Context, url string, opts *Options) error {
	if !IsURL(url) {
		return invalid("db", fmt.Sprintf("%q", url), "a postgres:// or postgresql:// URL (a bbolt file needs no migration: it is created and upgraded when opened)")
	}
	var po *postgres.Options
	if opts != nil {
		po = opts.Postgres
	}
	return postgres.Migrate(ctx, url, po)
}

// SchemaVersion is the version of idemrun's Postgres schema that this
// idemrun reads and writes, and Migrate brings a database to.
var SchemaVersion = postgres.SchemaVersion

// Redacted returns db as it may be shown: a URL with its password
// masked, a file path as it is.
func Redacted(db string) string {
	if IsURL(db) {
		return postgres.Redacted(db)
	}
	return db
}

// New returns a client over an open store of any backend; the client
// owns it (Close closes it). opts are as for Open; those about opening a
// file or a database do not apply.
func New(st store.Store, opts *Options) (*Client, error) {
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	if err := c.attach(st, c.opts.ReadOnly, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// attach makes the open store st c's own: it records the sensitive names
// given and reads those recorded, and takes the store's clock when it
// keeps one (store.Clock) and opts set none.
func (c *Client) attach(st store.Store, readOnly bool, opts *Options) error {
	red, err := sensitiveNames(st, readOnly, c.opts.SensitiveHeaders, c.opts.SensitiveParams, c.opts.Warn)
	if err != nil {
		return err
	}
	if clk, ok := st.(store.Clock); ok && (opts == nil || opts.Now == nil) {
		c.opts.Now = clk.Now
	}
	c.st, c.red, c.where = st, red, location(st)
	return nil
}

// DialSocket returns a client that works through the admin socket of the
// runner that holds the database at dbPath, and never opens the file
// itself (a process that polls a runner must not take the file from it
// when the runner is not up). opts are as for Open; those about the file
// do not apply.
func DialSocket(dbPath string, opts *Options) (*Client, error) {
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	r, err := dialSocket(dbPath)
	if err != nil {
		return nil, err
	}
	return c.through(r), nil
}

// DialTCP returns a client that works through a runner's admin API served
// on TCP at addr (host:port) with a bearer token.
func DialTCP(addr, token string, opts *Options) (*Client, error) {
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	r, err := dialTCP(addr, token)
	if err != nil {
		return nil, err
	}
	return c.through(r), nil
}

// newClient is a client with its options checked and defaulted, and no
// store yet.
func newClient(opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DefaultMaxAttempts <= 0 {
		o.DefaultMaxAttempts = DefaultMaxAttempts
	}
	if o.DefaultDeadline <= 0 {
		o.DefaultDeadline = DefaultDeadline
	}
	if o.DefaultAttemptTimeout <= 0 {
		o.DefaultAttemptTimeout = DefaultAttemptTO
	}
	// Defaults every Enqueue would refuse are refused here, once.
	if o.DefaultMaxAttempts > MaxAttemptsLimit {
		return nil, invalid("DefaultMaxAttempts", strconv.Itoa(o.DefaultMaxAttempts), fmt.Sprintf("0 (the default, %d) or an integer up to %d", DefaultMaxAttempts, MaxAttemptsLimit))
	}
	if o.DefaultDeadline > MaxDeadline {
		return nil, invalid("DefaultDeadline", o.DefaultDeadline.String(), fmt.Sprintf("0 (the default, %s) or a duration up to %s", DefaultDeadline, MaxDeadline))
	}
	if o.DefaultAttemptTimeout > MaxAttemptTimeout {
		return nil, invalid("DefaultAttemptTimeout", o.DefaultAttemptTimeout.String(), fmt.Sprintf("0 (the default, %s) or a duration up to %s", DefaultAttemptTO, MaxAttemptTimeout))
	}
	if o.Warn == nil {
		o.Warn = os.Stderr
	}
	allow, err := newHostAllow(o.AllowHosts)
	if err != nil {
		return nil, err
	}
	return &Client{opts: o, allow: allow}, nil
}

// openFile opens the bbolt file at path as c's store.
func (c *Client) openFile(path string) error {
	o := c.opts
	so := bolt.Options{}
	if o.Store != nil {
		so = *o.Store
	}
	if o.LockTimeout > 0 {
		so.LockTimeout = o.LockTimeout
	}
	so.ReadOnly = so.ReadOnly || o.ReadOnly
	so.MustExist = so.MustExist || o.MustExist
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(o.Warn, "idemrun: warning: %s has mode %04o; it holds request credentials, make it private: chmod 600 %s\n", path, fi.Mode().Perm(), path)
	}
	db, err := bolt.Open(path, &so)
	if err != nil {
		return err
	}
	if err := c.attach(db, so.ReadOnly, nil); err != nil {
		db.Close()
		return err
	}
	c.where = path
	return nil
}

// through makes c work through the runner's admin API r. The runner
// redacts what it answers with the names its file records; this client's
// own refusals, which cannot read those names, hide every header and
// parameter value.
func (c *Client) through(r *remote) *Client {
	c.rem, c.where, c.red = r, r.where, redact.All()
	if len(c.opts.SensitiveHeaders)+len(c.opts.SensitiveParams) > 0 {
		// This client hides them in what it shows; the runner, which
		// knows only the names its store records, does not.
		r.extra = redact.New(c.opts.SensitiveHeaders, c.opts.SensitiveParams)
		fmt.Fprintf(c.opts.Warn, "idemrun: warning: %s: the sensitive names given are not recorded through a runner's admin API: this client hides them, but the runner's own views and logs show only the names its store records (open the store when no runner holds it to record them)\n", c.where)
	}
	return c
}

// sensitiveNames records the extra sensitive names this open was given in
// the database (unless it is read-only) and returns the redaction rules for
// them and for every name recorded by earlier opens: a name an application
// marked sensitive stays redacted for the CLI, a runner's admin API and its
// logs, which open the file with no options of their own. Recorded names
// that cannot be read (a damaged value) hide every header and parameter
// value instead, with a warning, until an open that gives names rebuilds
// the list (store.AddSensitiveNames); the file still opens, so its check
// can report it.
func sensitiveNames(db store.Store, readOnly bool, headers, params []string, warn io.Writer) (*redact.Redactor, error) {
	if !readOnly {
		rebuilt, err := db.AddSensitiveNames(headers, params)
		if err != nil {
			return nil, err
		}
		if rebuilt {
			fmt.Fprintf(warn, "idemrun: warning: %s: a damaged list of recorded sensitive names was rebuilt from the names given and every name still readable in it (a name that was not is lost: give it again)\n", location(db))
		}
	}
	hs, ps, err := db.SensitiveNames()
	switch {
	case errors.Is(err, store.ErrCorrupt):
		fmt.Fprintf(warn, "idemrun: warning: %v; every header value and URL parameter value is shown redacted until the application that set its sensitive names opens it with them again (its check reports it)\n", err)
		return redact.All(), nil
	case err != nil:
		return nil, err
	}
	if len(hs)+len(ps)+len(headers)+len(params) == 0 {
		return redact.Default(), nil
	}
	return redact.New(append(hs, headers...), append(ps, params...)), nil
}

// Close closes the store after every acknowledged write is on disk, or
// the connections to the runner.
func (c *Client) Close() error {
	if c.rem != nil {
		return c.rem.close()
	}
	return c.st.Close()
}

// Store returns the underlying store, for tools that work on it directly
// (what only one backend offers is behind the store's optional
// interfaces: store.Backup, store.CommitObserver, store.Located); nil
// when the client works through a runner's admin API (Remote). To embed
// a runner use NewRunner, which also wires this client's redaction and
// host allowlist into it.
func (c *Client) Store() store.Store { return c.st }

// Remote reports whether the client works through a runner's admin API
// rather than on the store itself.
func (c *Client) Remote() bool { return c.rem != nil }

// location says where the store keeps its data, for messages.
func location(s store.Store) string {
	if l, ok := s.(store.Located); ok {
		return l.Location()
	}
	return "the store"
}

// ErrNotOffered is returned for an operation the client's store, or the
// way the client reaches it, does not offer.
var ErrNotOffered = errors.New("api: not offered")

// notOffered is the error of an operation that needs the store itself on
// a client that works through a runner.
func (c *Client) notOffered(op string) error {
	return fmt.Errorf("%w: %s needs the store itself, and this client works through the admin API of the runner that holds it (%s); stop the runner, or work on a copy", ErrNotOffered, op, c.where)
}

// writable refuses a write through a runner on a client opened
// read-only (the store refuses its own).
func (c *Client) writable() error {
	if c.rem != nil && c.opts.ReadOnly {
		return fmt.Errorf("api: %s was opened read-only", c.where)
	}
	return nil
}

// Redactor returns the redaction rules this client shows jobs with.
// Through a runner's admin API they are those of this client's own
// refusals (every value hidden): the runner redacts the jobs it answers
// with the names its store records.
func (c *Client) Redactor() *redact.Redactor { return c.red }

// SetNotify registers a function called after each enqueue, so a runner in
// the same process starts due work at once.
func (c *Client) SetNotify(fn func()) { c.notify = fn }

// The store's errors that application code checks with errors.Is, here so
// that code needs to import only this package. They are the store's own
// values: errors.Is(err, api.ErrKeyConflict) and errors.Is(err,
// store.ErrKeyConflict) agree.
var (
	// ErrKeyConflict: the idempotency key is held by a job with another
	// request (method, URL, body, headers); nothing was written.
	ErrKeyConflict = store.ErrKeyConflict
	// ErrNotFound: no job has that id or key.
	ErrNotFound = store.ErrNotFound
	// ErrIllegalTransition: the job is not in a state the action applies
	// to (cancel of a running job, retry of a succeeded one, ...).
	ErrIllegalTransition = store.ErrIllegalTransition
	// ErrLocked: another process holds the database file.
	ErrLocked = bolt.ErrLocked
	// ErrFailed: the store takes no more writes — a commit failed in a
	// way that leaves its view of the file unlike the disk, or the file
	// was deleted or replaced while open. Stop, check the disk or the
	// file, and open it again.
	ErrFailed = store.ErrFailed
	// ErrNoSchema: the Postgres database lacks idemrun's schema, or holds
	// an older version of it; Migrate creates or upgrades it.
	ErrNoSchema = postgres.ErrNoSchema
	// ErrCommitUnknown: the connection to the database ended while the
	// write committed; it may or may not be stored. A write that carries
	// its idempotency key is safe to send again.
	ErrCommitUnknown = store.ErrCommitUnknown
)
