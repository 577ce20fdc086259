package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/internal/parallel"
	"github.com/idemrun/idemrun/store"
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
	if err := checkRunAt(now, o.RunAt, o.Deadline); err != nil {
		return nil, err // validate checked it against an earlier reading
	}
	if !o.RunAt.IsZero() && o.RunAt.After(now) {
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
	if c.rem != nil {
		if err := c.writable(); err != nil {
			return EnqueueResult{}, err
		}
		// Checked here as well as by the runner: JSON would change bytes
		// that are not UTF-8 before the runner could refuse them, and
		// this client's defaults are sent with the job.
		req.Header = slices.Clone(req.Header)
		if err := c.validate(&req, &o); err != nil {
			return EnqueueResult{}, err
		}
		return c.rem.enqueue(ctx, req, o)
	}
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
	if c.rem != nil {
		if err := c.writable(); err != nil {
			return nil, err
		}
		return c.rem.enqueueMany(ctx, items, c.validate)
	}
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
	if c.rem != nil {
		return c.rem.get(ctx, idOrKey)
	}
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
	if c.rem != nil {
		// An older runner ignores by=key and looks a job up by id first.
		j, err := c.rem.getByKey(ctx, key)
		if err == nil && j.Key != key {
			return nil, fmt.Errorf("%w: no job holds the key %q", store.ErrNotFound, key)
		}
		return j, err
	}
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
	// States and the default Sort, and its pages continue with the Next of
	// an Oldest page.
	Oldest bool
	// Host limits the list to jobs whose URL has this host, as
	// store.HostOf names it ("api.example.com", "127.0.0.1:8080"); ""
	// means all.
	Host string
	// Since and Until limit the list to jobs last updated in [Since,
	// Until); a zero time leaves that side open.
	Since, Until time.Time
	// KeyPrefix limits the list to jobs whose idempotency key begins with
	// it; "" means all.
	KeyPrefix string
	// IDPrefix limits the list to jobs whose id begins with it; "" means
	// all.
	IDPrefix string
	// Sort orders the list: ListSortDefault (as described above),
	// ListSortNextRun (earliest next run first, for pending and unknown
	// States) or ListSortUpdated (latest update first, for the other
	// States).
	Sort ListSort
}

// ListSort orders a list; see ListFilter.Sort.
type ListSort = store.ListSort

// The orders of a list.
const (
	ListSortDefault = store.ListSortDefault
	ListSortNextRun = store.ListSortNextRun
	ListSortUpdated = store.ListSortUpdated
)

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

// Now is the time by the client's clock: Options.Now, else the store's
// (the database server's, on Postgres), which stamps its jobs' changes.
func (c *Client) Now() time.Time { return c.opts.Now() }

// List returns a page of jobs.
func (c *Client) List(ctx context.Context, f ListFilter) (ListPage, error) {
	if c.rem != nil {
		return c.rem.list(ctx, f)
	}
	sf, err := c.storeFilter(f)
	if err != nil {
		return ListPage{}, err
	}
	p, err := c.st.List(sf)
	if err != nil {
		return ListPage{}, err
	}
	out := ListPage{Next: p.Next, Jobs: make([]*Job, len(p.Jobs))}
	leases, lerr := c.st.Leases() // one reading for the whole page
	for i, j := range p.Jobs {
		out.Jobs[i] = c.summary(j)
		c.setLease(out.Jobs[i], j, leases, lerr)
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
	if c.rem != nil {
		return c.rem.stats(ctx)
	}
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

// Actor names who steers a job in its history: $IDEMRUN_ACTOR, $USER or
// $LOGNAME, else the name of the process's user, else its uid. Cancel,
// Retry, Resolve and the host changes use it when given an empty actor.
func Actor() string { return ActorFrom(os.Getenv) }

// ActorFrom is Actor reading the variables through getenv. A cron job or
// a container often sets none of them, and "unknown" would tell a reader
// of the history nothing, hence the user's name or uid.
func ActorFrom(getenv func(string) string) string {
	for _, k := range []string{"IDEMRUN_ACTOR", "USER", "LOGNAME"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if uid := os.Getuid(); uid >= 0 {
		return "uid " + strconv.Itoa(uid)
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
	if c.rem != nil {
		return c.steerRemote(ctx, "cancel", idOrKey, adminwire.Steer{Actor: actor, Note: note})
	}
	id, err := c.resolveID(idOrKey)
	if err != nil {
		return nil, err
	}
	j, err := c.st.Cancel(ctx, id, c.opts.Now().UTC(), actorOr(actor), note)
	if err != nil {
		return nil, err
	}
	c.changes.wake(j.ID)
	return c.view(j), nil
}

// Retry moves a failed job back to pending with the same key and a fresh
// budget.
func (c *Client) Retry(ctx context.Context, idOrKey, actor, note string) (*Job, error) {
	if err := checkSteer(actor, note); err != nil {
		return nil, err
	}
	if c.rem != nil {
		return c.steerRemote(ctx, "retry", idOrKey, adminwire.Steer{Actor: actor, Note: note})
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
	if c.rem != nil {
		return c.steerRemote(ctx, "resolve", idOrKey, adminwire.Steer{As: string(as), Actor: actor, Note: note})
	}
	id, err := c.resolveID(idOrKey)
	if err != nil {
		return nil, err
	}
	j, err := c.st.Resolve(ctx, id, as, c.opts.Now().UTC(), actorOr(actor), note)
	if err != nil {
		return nil, err
	}
	c.changes.wake(j.ID)
	return c.view(j), nil
}

// steerRemote sends a cancel, retry or resolve through the runner.
func (c *Client) steerRemote(ctx context.Context, op, idOrKey string, in adminwire.Steer) (*Job, error) {
	// The actor is this process's, as on the file: the runner would
	// otherwise fill in its own user.
	in.Actor = actorOr(in.Actor)
	if err := c.writable(); err != nil {
		return nil, err
	}
	return c.rem.steer(ctx, op, idOrKey, in)
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
	if c.rem != nil {
		return c.rem.backup(ctx, w)
	}
	b, ok := c.st.(store.Backup)
	if !ok {
		return 0, fmt.Errorf("%w: %s cannot be copied while in use; use the backend's own backup", ErrNotOffered, location(c.st))
	}
	return b.Backup(w)
}

// Check verifies the file (bbolt consistency and idemrun's invariants).
func (c *Client) Check(ctx context.Context) (store.CheckReport, error) {
	if c.rem != nil {
		return store.CheckReport{}, c.notOffered("a check")
	}
	return c.st.Check()
}

// Sweep deletes succeeded, failed and canceled jobs last updated more than
// olderThan ago, in batches of 1000. Their keys stay reserved (enqueueing
// one again is refused) until keysFor has passed since the job's last
// update; a keysFor shorter than olderThan releases keys with their jobs.
// It returns how many jobs it deleted.
func (c *Client) Sweep(ctx context.Context, olderThan, keysFor time.Duration) (int, error) {
	if c.rem != nil {
		return 0, c.notOffered("a retention sweep")
	}
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
