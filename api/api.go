package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/parallel"
	"github.com/idemrun/idemrun/internal/redact"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// Header is one request header line; order is kept.
type Header = store.HeaderField

// State is a job state; see the store package for the seven values.
type State = store.State

// Request is the side-effecting HTTP request a job sends.
type Request struct {
	// Method defaults to POST.
	Method string
	// URL is an absolute http or https URL.
	URL string
	// Header lines are sent in this order on every attempt. Idempotency-Key
	// is set by idemrun from the job's key.
	Header []Header
	// Body is sent byte for byte on every attempt; at most 1 MiB.
	Body []byte
}

// EnqueueOptions are a job's key, status endpoint and limits.
type EnqueueOptions struct {
	// Key is the idempotency key. Defaults to a new random key
	// (idemkey.New). A caller that may enqueue the same request twice
	// (e.g. after its own crash) should pass its own stable key.
	Key string
	// KeyFormat is how the key is written in the Idempotency-Key header.
	// Defaults to a plain token.
	KeyFormat idemkey.Format
	// StatusURL is a template with {key} and/or {id}; when set, an unknown
	// outcome is settled by GET on it before any replay. Defaults to none.
	StatusURL string
	// KeyTTL is how long the target deduplicates requests by key. Without a
	// status URL, an unknown outcome is replayed only inside it. Defaults to
	// 0 (the target's deduplication is not relied on).
	KeyTTL time.Duration
	// MaxAttempts bounds attempts. Defaults to Options.DefaultMaxAttempts
	// (5); at most 100.
	MaxAttempts int
	// Deadline bounds the job's automatic work, from enqueue. Defaults to
	// Options.DefaultDeadline (15 minutes); at most 30 days.
	Deadline time.Duration
	// AttemptTimeout bounds one attempt. Defaults to
	// Options.DefaultAttemptTimeout (10 seconds); at most 10 minutes.
	AttemptTimeout time.Duration
	// ReplaySafe declares the request safe to repeat (like GET): unknown
	// transport outcomes are then retried directly. Defaults to false.
	ReplaySafe bool
	// NoEffectStatuses lists statuses the target guarantees it did not
	// process (e.g. 503 from a load shedder), opting into looser retries.
	// Defaults to none.
	NoEffectStatuses []int
	// RunAt delays the first attempt. Defaults to now.
	RunAt time.Time
}

// Options configures Open. A nil *Options means all defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process's file lock.
	// Defaults to 2 seconds.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only (it must exist).
	ReadOnly bool
	// MustExist refuses to create a missing file.
	MustExist bool
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// SensitiveHeaders are shown redacted in addition to Authorization,
	// Proxy-Authorization, Cookie, Set-Cookie and X-Api-Key. They are
	// recorded in the database (unless it is opened read-only), so every
	// later open redacts them too — the CLI, a runner's admin API and its
	// logs — without being told; a recorded name is never removed.
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
	// Store passes storage options through (fault hooks, batch size).
	Store *bolt.Options
	// Warn receives warnings (e.g. a database file readable by others).
	// Defaults to standard error.
	Warn io.Writer
}

// Client is an open idemrun store: what application code uses to
// enqueue, inspect and steer jobs, and to embed a runner.
type Client struct {
	st    store.Store
	opts  Options
	red   *redact.Redactor
	allow *hostAllow
	// notify, when set by a runner embedded in this process, wakes it after
	// an enqueue.
	notify func()
	// lastTemplate is the status URL template parsed last (see template).
	lastTemplate atomic.Pointer[statusquery.Template]
}

// Open opens or creates the idemrun database at path.
func Open(path string, opts *Options) (*Client, error) {
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
		return nil, err
	}
	red, err := sensitiveNames(db, so.ReadOnly, o.SensitiveHeaders, o.SensitiveParams, o.Warn)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Client{st: db, opts: o, red: red, allow: allow}, nil
}

// sensitiveNames records the extra sensitive names this open was given in
// the database (unless it is read-only) and returns the redaction rules for
// them and for every name recorded by earlier opens: a name an application
// marked sensitive stays redacted for the CLI, a runner's admin API and its
// logs, which open the file with no options of their own. Recorded names
// that cannot be read (a damaged value) hide every header and parameter
// value instead, with a warning, until an open that gives names rebuilds
// the list (store.AddSensitiveNames); the file still opens, so `idemrun
// check` can report it.
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
		fmt.Fprintf(warn, "idemrun: warning: %v; every header value and URL parameter value is shown redacted until the application that set its sensitive names opens it with them again (idemrun check reports it)\n", err)
		return redact.All(), nil
	case err != nil:
		return nil, err
	}
	if len(hs)+len(ps)+len(headers)+len(params) == 0 {
		return redact.Default(), nil
	}
	return redact.New(append(hs, headers...), append(ps, params...)), nil
}

// Close closes the database after every acknowledged write is on disk.
func (c *Client) Close() error { return c.st.Close() }

// Store returns the underlying store, for tools that work on it directly
// (what only one backend offers is behind the store's optional
// interfaces: store.Backup, store.CommitObserver, store.Located). To embed
// a runner use NewRunner, which also wires this client's redaction and
// host allowlist into it.
func (c *Client) Store() store.Store { return c.st }

// location says where the store keeps its data, for messages.
func location(s store.Store) string {
	if l, ok := s.(store.Located); ok {
		return l.Location()
	}
	return "the store"
}

// ErrNotOffered is returned for an operation the client's store (or the
// way the client reaches it) does not offer.
var ErrNotOffered = errors.New("api: not offered by this store")

// Redactor returns the redaction rules this client shows jobs with.
func (c *Client) Redactor() *redact.Redactor { return c.red }

// SetNotify registers a function called after each enqueue, so a runner in
// the same process starts due work at once.
func (c *Client) SetNotify(fn func()) { c.notify = fn }

// EnqueueResult is the outcome of an enqueue.
type EnqueueResult struct {
	Job *Job
	// Existing is true when the key already held this same request: the
	// stored job is returned and nothing new was created. "The same" is
	// the request's fingerprint (idemkey.Fingerprint): method, URL, body
	// and defining headers; credentials (Authorization, Cookie, X-Api-Key
	// …), User-Agent and tracing headers do not count, so a repeat with
	// rotated credentials is Existing and the stored job keeps sending
	// the headers it was stored with.
	Existing bool
}

// BuildJob validates a request and its options and returns the job that
// Enqueue would store. Nothing is written.
func (c *Client) BuildJob(req Request, o EnqueueOptions) (*store.Job, error) {
	req.Header = append([]Header(nil), req.Header...)
	if err := c.validate(&req, &o); err != nil {
		return nil, err
	}
	if o.Key == "" {
		o.Key = idemkey.New()
	}
	h := make(http.Header, len(req.Header))
	for _, f := range req.Header {
		h.Add(f.Name, f.Value)
	}
	now := c.opts.Now().UTC()
	runAt := now
	if !o.RunAt.IsZero() && o.RunAt.After(now) {
		if o.RunAt.After(now.Add(o.Deadline)) {
			return nil, invalid("run-at", o.RunAt.UTC().Format(time.RFC3339), "a time before the job's deadline (enqueue time + deadline, at most 30 days ahead)")
		}
		runAt = o.RunAt.UTC()
	}
	j := &store.Job{
		ID:               store.NewID(),
		Key:              o.Key,
		Fingerprint:      idemkey.Fingerprint(req.Method, req.URL, h, req.Body),
		State:            store.StatePending,
		Request:          store.Request{Method: req.Method, URL: req.URL, Header: req.Header, Body: append([]byte(nil), req.Body...)},
		StatusURL:        o.StatusURL,
		KeyTTL:           o.KeyTTL,
		MaxAttempts:      o.MaxAttempts,
		DeadlineAfter:    o.Deadline,
		AttemptTimeout:   o.AttemptTimeout,
		ReplaySafe:       o.ReplaySafe,
		NoEffectStatuses: append([]int(nil), o.NoEffectStatuses...),
		CreatedAt:        now,
		UpdatedAt:        now,
		NextRunAt:        runAt,
		Deadline:         now.Add(o.Deadline),
	}
	if o.KeyFormat != idemkey.FormatToken {
		j.KeyFormat = o.KeyFormat.String()
	}
	return j, nil
}

// Enqueue validates and durably stores a job. When it returns nil, the job
// is on disk (fsync'd). The same key with the same request returns the
// existing job (Existing); the same key with a different request fails with
// an error matching store.ErrKeyConflict that names the job holding it.
func (c *Client) Enqueue(ctx context.Context, req Request, o EnqueueOptions) (EnqueueResult, error) {
	j, err := c.BuildJob(req, o)
	if err != nil {
		return EnqueueResult{}, err
	}
	res, err := c.st.Enqueue(ctx, j)
	if err != nil {
		return EnqueueResult{}, err
	}
	if c.notify != nil && !res.Existing {
		c.notify()
	}
	return EnqueueResult{Job: c.view(res.Job), Existing: res.Existing}, nil
}

// ManyItem is one job of EnqueueMany.
type ManyItem struct {
	Request Request
	Options EnqueueOptions
}

// ManyResult is the outcome for one job of EnqueueMany: a job (maybe
// Existing) or the refusal of that job alone.
type ManyResult struct {
	Job      *Job
	Existing bool
	Err      error
}

// EnqueueMany validates every job and stores all valid ones in one
// transaction, with Enqueue's key rules per job. Invalid jobs and key
// conflicts get their own Err; the returned error means nothing was stored.
func (c *Client) EnqueueMany(ctx context.Context, items []ManyItem) ([]ManyResult, error) {
	// Validation, fingerprints, encoding and the views (redacted URLs and
	// headers) are CPU work: the store spreads them over the cores while
	// its writer inserts the jobs already made. A new job is stored as
	// built, so its view is made here too.
	views := make([]*Job, len(items))
	res, err := c.st.EnqueueManyFunc(ctx, len(items), func(i int) (*store.Job, error) {
		j, err := c.BuildJob(items[i].Request, items[i].Options)
		if err == nil {
			views[i] = c.view(j)
		}
		return j, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ManyResult, len(items))
	var added atomic.Bool
	parallel.For(len(res), func(i int) {
		r := res[i]
		out[i].Err = r.Err
		out[i].Existing = r.Existing
		switch {
		case r.Job == nil:
		case r.Existing:
			out[i].Job = c.view(r.Job)
		default:
			out[i].Job = views[i]
			added.Store(true)
		}
	})
	if c.notify != nil && added.Load() {
		c.notify()
	}
	return out, nil
}

// Get returns the job with this id, or the job holding this key when the
// argument is not a job id.
func (c *Client) Get(ctx context.Context, idOrKey string) (*Job, error) {
	j, err := c.lookup(idOrKey)
	if err != nil {
		return nil, err
	}
	return c.view(j), nil
}

// lookup finds a job by id, or by key when the argument is no job's id.
func (c *Client) lookup(idOrKey string) (*store.Job, error) {
	j, err := c.st.Get(idOrKey)
	if errors.Is(err, store.ErrNotFound) {
		j, err = c.st.GetByKey(idOrKey)
	}
	return j, err
}

// GetByKey returns the job holding an idempotency key.
func (c *Client) GetByKey(ctx context.Context, key string) (*Job, error) {
	j, err := c.st.GetByKey(key)
	if err != nil {
		return nil, err
	}
	return c.view(j), nil
}

// ListFilter selects jobs for List.
type ListFilter struct {
	// States limits the list; empty means all states.
	States []State
	// Limit is the page size. Defaults to 100; at most 10,000.
	Limit int
	// Cursor continues from a previous page's Next.
	Cursor string
	// Oldest lists each state's oldest jobs first (earliest next_run_at for
	// pending and unknown, least recently updated otherwise); it needs
	// States, and its pages continue with the Next of an Oldest page.
	Oldest bool
}

// ListPage is one page of jobs, newest first.
type ListPage struct {
	Jobs []*Job `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// uniqueStates is ss without repeats, in first-appearance order.
func uniqueStates(ss []State) []State {
	out := make([]State, 0, len(ss))
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// List returns a page of jobs.
func (c *Client) List(ctx context.Context, f ListFilter) (ListPage, error) {
	if f.Limit < 0 || f.Limit > store.MaxListLimit {
		return ListPage{}, invalid("limit", fmt.Sprint(f.Limit), fmt.Sprintf("an integer from 1 to %d", store.MaxListLimit))
	}
	for _, s := range f.States {
		if _, err := store.ParseState(string(s)); err != nil {
			return ListPage{}, invalid("state", string(s), "pending, running, unknown, succeeded, failed, needs_attention, canceled")
		}
	}
	if f.Cursor != "" {
		if cf, ok := c.st.(cursorChecker); ok && !cf.CursorFits(f.Cursor, f.States) {
			return ListPage{}, invalid("cursor", f.Cursor, "the next cursor printed by the previous page of the same list (same --state filters)")
		}
	}
	if f.Oldest && len(f.States) == 0 {
		return ListPage{}, invalid("oldest", "true", "a state filter (--state)")
	}
	// A state named twice is listed once, where it first appears.
	f.States = uniqueStates(f.States)
	p, err := c.st.List(store.ListFilter{States: f.States, Limit: f.Limit, Cursor: f.Cursor, Oldest: f.Oldest})
	if err != nil {
		return ListPage{}, err
	}
	out := ListPage{Next: p.Next, Jobs: make([]*Job, len(p.Jobs))}
	for i, j := range p.Jobs {
		out.Jobs[i] = c.summary(j)
	}
	return out, nil
}

// cursorChecker is a store that can tell a list cursor it could not have
// printed, so a bad one is refused as invalid input (bbolt's cursors are
// job ids or index positions).
type cursorChecker interface {
	CursorFits(cursor string, states []store.State) bool
}

// Stats returns how many jobs are in each state (constant time).
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	m, err := c.st.Stats()
	if err != nil {
		return nil, err
	}
	out := make(Stats, len(m))
	for s, n := range m {
		out[string(s)] = n
	}
	return out, nil
}

// Stats maps every state name to its job count.
type Stats map[string]int64

// Actor names who steers a job in its history: $IDEMRUN_ACTOR, else the OS
// user ($USER, $LOGNAME), else "unknown". Cancel, Retry and Resolve use it
// when given an empty actor.
func Actor() string {
	for _, k := range []string{"IDEMRUN_ACTOR", "USER", "LOGNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "unknown"
}

func (c *Client) resolveID(idOrKey string) (string, error) {
	j, err := c.lookup(idOrKey)
	if err != nil {
		return "", err
	}
	return j.ID, nil
}

func checkSteer(actor, note string) error {
	if !utf8.ValidString(note) {
		return &InvalidError{Field: "note", Value: "(not valid UTF-8)", Accepted: "text in valid UTF-8"}
	}
	if !utf8.ValidString(actor) {
		return &InvalidError{Field: "actor", Value: "(not valid UTF-8)", Accepted: "text in valid UTF-8"}
	}
	if len(note) > MaxNoteLen {
		return invalid("note", note, fmt.Sprintf("at most %d bytes", MaxNoteLen))
	}
	if len(actor) > 256 {
		return invalid("actor", actor, "at most 256 bytes")
	}
	return nil
}

// Cancel cancels a pending job that cannot have had an effect.
func (c *Client) Cancel(ctx context.Context, idOrKey, actor, note string) (*Job, error) {
	if err := checkSteer(actor, note); err != nil {
		return nil, err
	}
	id, err := c.resolveID(idOrKey)
	if err != nil {
		return nil, err
	}
	j, err := c.st.Cancel(ctx, id, c.opts.Now().UTC(), actorOr(actor), note)
	if err != nil {
		return nil, err
	}
	return c.view(j), nil
}

// Retry moves a failed job back to pending with the same key and a fresh
// budget.
func (c *Client) Retry(ctx context.Context, idOrKey, actor, note string) (*Job, error) {
	if err := checkSteer(actor, note); err != nil {
		return nil, err
	}
	id, err := c.resolveID(idOrKey)
	if err != nil {
		return nil, err
	}
	j, err := c.st.Retry(ctx, id, c.opts.Now().UTC(), actorOr(actor), note)
	if err != nil {
		return nil, err
	}
	if c.notify != nil {
		c.notify()
	}
	return c.view(j), nil
}

// Resolve ends a needs_attention job as succeeded or failed on a person's
// word; note says why and is required.
func (c *Client) Resolve(ctx context.Context, idOrKey string, as State, actor, note string) (*Job, error) {
	if as != store.StateSucceeded && as != store.StateFailed {
		return nil, invalid("as", string(as), "succeeded or failed")
	}
	if strings.TrimSpace(note) == "" || len(note) > MaxNoteLen {
		return nil, invalid("note", note, fmt.Sprintf("a non-empty explanation of at most %d bytes (who checked what)", MaxNoteLen))
	}
	if err := checkSteer(actor, note); err != nil {
		return nil, err
	}
	id, err := c.resolveID(idOrKey)
	if err != nil {
		return nil, err
	}
	j, err := c.st.Resolve(ctx, id, as, c.opts.Now().UTC(), actorOr(actor), note)
	if err != nil {
		return nil, err
	}
	return c.view(j), nil
}

func actorOr(a string) string {
	if a == "" {
		return Actor()
	}
	return a
}

// Backup writes a consistent copy of the database to w while work goes on.
// A store that cannot copy itself while in use returns ErrNotOffered.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	b, ok := c.st.(store.Backup)
	if !ok {
		return 0, fmt.Errorf("%w: %s cannot be copied while in use; use the backend's own backup", ErrNotOffered, location(c.st))
	}
	return b.Backup(w)
}

// Check verifies the file (bbolt consistency and idemrun's invariants).
func (c *Client) Check(ctx context.Context) (store.CheckReport, error) {
	return c.st.Check()
}

// Service is every operation the CLI performs. *Client does them on the
// file; *Remote does them through a running runner's admin API.
type Service interface {
	Enqueue(ctx context.Context, req Request, o EnqueueOptions) (EnqueueResult, error)
	EnqueueMany(ctx context.Context, items []ManyItem) ([]ManyResult, error)
	Get(ctx context.Context, idOrKey string) (*Job, error)
	List(ctx context.Context, f ListFilter) (ListPage, error)
	Stats(ctx context.Context) (Stats, error)
	Cancel(ctx context.Context, idOrKey, actor, note string) (*Job, error)
	Retry(ctx context.Context, idOrKey, actor, note string) (*Job, error)
	Resolve(ctx context.Context, idOrKey string, as State, actor, note string) (*Job, error)
	Backup(ctx context.Context, w io.Writer) (int64, error)
	Close() error
}

var _ Service = (*Client)(nil)

// Sweep deletes succeeded, failed and canceled jobs last updated more than
// olderThan ago, in batches of 1000. Their keys stay reserved (enqueueing
// one again is refused) until keysFor has passed since the job's last
// update; a keysFor shorter than olderThan releases keys with their jobs.
// It returns how many jobs it deleted.
func (c *Client) Sweep(ctx context.Context, olderThan, keysFor time.Duration) (int, error) {
	now := c.opts.Now()
	cutoff := now.Add(-olderThan)
	keyCutoff := now.Add(-max(keysFor, olderThan))
	total := 0
	for {
		n, released, err := c.st.Sweep(ctx, cutoff, keyCutoff, 1000)
		total += n
		if err != nil || (n < 1000 && released < 1000) {
			return total, err
		}
	}
}

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
)
