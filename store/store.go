package store

import (
	"context"
	"io"
	"time"
)

// Store is the contract every backend implements: all that the runner and
// the api package use of a store. The contract suite (store/storetest)
// runs every method against a backend.
//
// Times passed in are the caller's clock readings. Writes are durable when
// they return without error. After Close every method returns an error
// matching ErrClosed (a second Close returns nil).
type Store interface {
	Jobs
	Work
	Hosts
	// Check verifies the stored data against idemrun's invariants (each
	// job decodes, counters match a count, indexes match the jobs). It
	// reads everything: it is for diagnosis.
	Check() (CheckReport, error)
	// Close closes the store after every acknowledged write is durable.
	Close() error
}

// Jobs is the part of Store that enqueues, reads and steers jobs: what an
// application's client uses.
type Jobs interface {
	// Enqueue stores a new job. A job whose key already holds the same
	// request (fingerprint and key format) returns the stored job with
	// Existing set; a different request under the key is refused with a
	// *KeyConflictError.
	Enqueue(ctx context.Context, j *Job) (EnqueueResult, error)
	// EnqueueMany enqueues jobs, each as Enqueue would; a refusal of one
	// job is in its result's Err and does not stop the others. The error
	// is for the store as a whole.
	EnqueueMany(ctx context.Context, jobs []*Job) ([]EnqueueResult, error)
	// EnqueueManyFunc is EnqueueMany over n jobs made by build, so a large
	// batch need not be held in memory at once. An error from build is that
	// job's Err; the other jobs are stored as EnqueueMany stores them.
	EnqueueManyFunc(ctx context.Context, n int, build func(i int) (*Job, error)) ([]EnqueueResult, error)

	// Get returns the job with this id, or ErrNotFound.
	Get(id string) (*Job, error)
	// GetByKey returns the job with this idempotency key, or ErrNotFound.
	GetByKey(key string) (*Job, error)
	// List returns a page of jobs (see ListFilter).
	List(f ListFilter) (ListPage, error)
	// Stats counts jobs by state.
	Stats() (map[State]int64, error)
	// OldestDue returns the earliest NextRunAt among jobs of state s
	// (pending or unknown), or the zero time when there are none.
	OldestDue(s State) (time.Time, error)

	// Cancel moves a pending job that cannot have had an effect to
	// canceled.
	Cancel(ctx context.Context, id string, now time.Time, actor, note string) (*Job, error)
	// Retry moves a failed job back to pending with a fresh attempt budget
	// and deadline.
	Retry(ctx context.Context, id string, now time.Time, actor, note string) (*Job, error)
	// Resolve ends a job that needs attention as succeeded or failed.
	Resolve(ctx context.Context, id string, as State, now time.Time, actor, note string) (*Job, error)
	// MatchIDs returns the ids of up to max jobs that f matches
	// (ListFilter.Matches; States are required, Cursor, Limit, Oldest and
	// Sort are ignored), read in one snapshot, in no promised order. more
	// is true when other jobs match too.
	MatchIDs(f ListFilter, max int) (ids []string, more bool, err error)
	// ManualMany applies fn, a manual action (CancelJob, RetryJob,
	// ResolveJob's), to each job of ids in one transaction, with the
	// checks Cancel, Retry and Resolve apply. A job that is gone or that
	// fn refuses is left as it is: errs[i] says why (ErrNotFound, a
	// *TransitionError, fn's error), nil when job ids[i] changed. At most
	// MaxBulkBatch ids; err is for the batch as a whole, and nothing is
	// changed with it.
	ManualMany(ctx context.Context, ids []string, fn TransitionFunc) (errs []error, err error)
	// Sweep deletes up to limit ended jobs last updated before jobCutoff;
	// the key of a deleted job stays reserved until keyCutoff passes its
	// deletion. It returns how many jobs and key reservations it deleted.
	Sweep(ctx context.Context, jobCutoff, keyCutoff time.Time, limit int) (jobs, keys int, err error)

	// SensitiveNames returns the header and URL parameter names recorded
	// as sensitive. A recorded list that cannot be read is a
	// *DamagedNamesError.
	SensitiveNames() (headers, params []string, err error)
	// AddSensitiveNames records more sensitive names (a name is never
	// removed). It reports whether it rebuilt a damaged list.
	AddSensitiveNames(headers, params []string) (rebuilt bool, err error)
}

// Work is the part of Store a runner uses: leases, claims and outcomes.
type Work interface {
	// Register starts the lease of a runner instance, lasting ttl from now.
	// An empty id, or the id of a runner still registered, is refused.
	Register(ctx context.Context, r RunnerInfo, now time.Time, ttl time.Duration) error
	// Heartbeat renews the lease of runner id to now+ttl. It returns
	// ErrLeaseLost when the lease expired (now is at or after Expires) or
	// is gone: the runner must stop claiming; its running jobs are, or
	// will be, rescued.
	Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error
	// Deregister ends the lease of runner id (an unknown id is not an
	// error). Its running jobs are then rescued by the next Rescue.
	Deregister(ctx context.Context, id string) error
	// Leases lists the registered runners, expired leases included until
	// a Rescue removes them.
	Leases() ([]Lease, error)
	// Rescue moves every running job whose owner's lease has expired (or
	// who has none) to unknown: its attempt may have reached the target,
	// so a status query comes before any replay. The backend raises the
	// fence, sets MayHaveEffect, UpdatedAt and NextRunAt to now, and
	// UnknownSince (with StatusBase) when the job was not already in an
	// unknown episode; Owner is kept. fn, when not nil, then sets the rest
	// (a later NextRunAt, the history entry). Jobs of live runners are
	// never touched, and expired leases are dropped. It returns how many
	// jobs it moved.
	Rescue(ctx context.Context, now time.Time, fn func(j *Job)) (int, error)

	// ClaimDue claims due jobs of one state, oldest NextRunAt first, for
	// req.Owner. A pending job becomes running with one more attempt; an
	// unknown job stays unknown with one more status query; both get a
	// new fence. The claim is durable when ClaimDue returns, before any
	// byte is sent. Concurrent claimers never claim one job twice. A
	// claim for an owner without a live lease is refused with
	// ErrLeaseLost; an empty Owner (a tool, a test) claims unowned jobs,
	// which any Rescue may take.
	ClaimDue(ctx context.Context, req ClaimRequest) ([]Claim, error)
	// FinishClaim writes the outcome of a claim: fn changes a copy of
	// the claimed job; the change is checked against the transition
	// table, and a change of ID, Key, Fence, Owner, the request, the
	// fingerprint or the key format is refused. It is refused with
	// ErrFenced when the job is no longer held by c (a later claim or a
	// rescue raised its fence, or the claim's attempt or owner differ),
	// and with a *TransitionError when the claimed job is not running or
	// unknown. A claim is meant to be finished once: a second finish is
	// refused unless the first kept both the state and the index time
	// (NextRunAt for an unknown job, UpdatedAt for a running one), and
	// then it replaces the first. When next is not nil, the due job
	// (pending or unknown) with the earliest NextRunAt is claimed in the
	// same transaction and
	// returned; it is nil when nothing is due, when the finish was
	// refused, or when next.Owner holds no live lease.
	FinishClaim(ctx context.Context, c Claim, fn TransitionFunc, next *NextClaim) (*Job, *Claim, error)
}

// Backup is implemented by backends that copy a consistent snapshot of
// their data while in use (bbolt's file).
type Backup interface {
	Backup(w io.Writer) (int64, error)
}

// CommitObserver is implemented by backends that report each commit's
// duration and size, for metrics.
type CommitObserver interface {
	SetCommitObserver(fn func(d time.Duration, ops int))
}

// Located is implemented by backends that can say where their data lives
// (a file path, a database URL without its password), for messages.
type Located interface {
	Location() string
}

// Clock is implemented by backends shared by processes on many machines,
// whose database's clock judges schedules and leases (Postgres's now()):
// nodes whose own clocks disagree still agree on when a job is due and
// when a lease ends. Now is the database's time as this process best
// knows it; the runner and api use it in place of time.Now.
type Clock interface {
	Now() time.Time
}

// Wakeups is implemented by backends that announce commits of other
// processes that may make work due (Postgres LISTEN/NOTIFY on enqueue).
// The channel receives after such commits (several may merge into one)
// and is closed when ctx ends or the backend cannot listen; a runner
// polls besides, so a missed announcement only delays work.
type Wakeups interface {
	Wakeups(ctx context.Context) <-chan struct{}
}
