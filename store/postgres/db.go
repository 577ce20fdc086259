package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/internal/jobbinary"
)

// DefaultSchema is the schema that holds idemrun's tables unless
// Options.Schema names another.
const DefaultSchema = "idemrun"

// Errors of Open and Migrate, in the store's terms.
var (
	// ErrNoSchema: the database lacks idemrun's tables in the schema, or
	// holds an older version of them; Migrate creates or upgrades them.
	ErrNoSchema = errors.New("store: the database has no idemrun schema of this version")
	// ErrNewerSchema: the schema was migrated by a newer idemrun.
	ErrNewerSchema = errors.New("store: the database schema is newer than this idemrun")
	// ErrCorruptRecord: a stored job does not decode, or its columns
	// disagree with it.
	ErrCorruptRecord = jobbinary.ErrCorrupt
)

// Options configures Open and Migrate. A nil *Options means all defaults.
type Options struct {
	// Schema is the Postgres schema that holds idemrun's tables, so they
	// sit beside an application's own. Defaults to DefaultSchema.
	Schema string
	// MaxConns is the most connections the handle opens. Zero keeps the
	// URL's pool_max_conns, or pgxpool's default (four, or the number of
	// CPUs if more). A runner needs about one per worker that is writing
	// at a time.
	MaxConns int32

	// LocalClock stands for this machine's clock (time.Now when nil), the
	// one Now adds the database's offset to: tests give it a skew. Its
	// readings should carry a monotonic clock reading, as time.Now's do.
	LocalClock func() time.Time
	// ClockRefresh is how often the database's clock is measured again
	// (DefaultClockRefresh when zero).
	ClockRefresh time.Duration

	// PollOnly opens no listening connection: Wakeups' channels never
	// receive. For a pooler in transaction mode (PgBouncer), which does
	// not keep a LISTEN's session. Writes still notify.
	PollOnly bool

	// BeforeCommit, when set, is called before each COMMIT with the
	// backend process id of the transaction's connection: tests end that
	// backend there, to see what a connection lost during a commit does.
	BeforeCommit func(ctx context.Context, backendPID uint32)
}

func (o *Options) schema() string {
	if o == nil || o.Schema == "" {
		return DefaultSchema
	}
	return o.Schema
}

// DB is an open idemrun store in a Postgres database. It implements
// store.Store; many DBs, in one process or many, may share a database.
type DB struct {
	pool    *pgxpool.Pool
	schema  string
	where   string // the URL without its password, and the schema, for messages
	secrets []string
	q       queries
	closed  atomic.Bool
	clock   *clock
	life    context.Context // ends with Close, and with it the background goroutines
	end     context.CancelFunc
	workers sync.WaitGroup // the background goroutines
	notify  *notifier
	wake    wakeups
	// listenCfg is the listening connection's configuration, nil with
	// Options.PollOnly.
	listenCfg *pgx.ConnConfig

	beforeCommit func(ctx context.Context, backendPID uint32)
	// finishes groups concurrent FinishClaims into shared transactions.
	finishes finishGroup
	// later counts the finishes FinishClaimLater queued and not yet
	// done; Close waits for them (finishlater.go).
	later laterFinishes
}

var (
	_ store.Store   = (*DB)(nil)
	_ store.Located = (*DB)(nil)
	_ store.Clock   = (*DB)(nil)
	_ store.Wakeups = (*DB)(nil)

	_ store.FinishLater = (*DB)(nil)
)

// Open connects to the database at url (a postgres:// URL or a keyword
// string, as pgx reads them) and checks that its schema holds idemrun's
// tables at this version. It creates nothing: a database without them is
// refused with ErrNoSchema (Migrate creates them), one migrated by a newer
// idemrun with ErrNewerSchema; a connection that cannot be made is a
// *ConnectError naming the problem. It reads the server's clock (Now).
// No error names the URL's password.
func Open(ctx context.Context, url string, opts *Options) (*DB, error) {
	schema := opts.schema()
	if err := checkSchemaName(schema); err != nil {
		return nil, err
	}
	r := newRedactor(url)
	if err := checkUserInfo(r, url); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, r.parseError(err)
	}
	if opts != nil && opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "idemrun"
	}
	where := fmt.Sprintf("%s (schema %s)", r.location(), schema)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, r.wrap(fmt.Errorf("store: open %s: %w", where, err))
	}
	db := &DB{pool: pool, schema: schema, where: where, secrets: r.secrets, q: newQueries(schema)}
	db.life, db.end = context.WithCancel(context.Background())
	var o Options
	if opts != nil {
		o = *opts
	}
	db.beforeCommit = o.BeforeCommit
	db.notify = &notifier{channel: channelName(schema), send: func(ctx context.Context) {
		_, _ = pool.Exec(ctx, notifySQL, db.notify.channel) // a lost notification only delays work
	}}
	if !o.PollOnly {
		db.listenCfg = cfg.ConnConfig.Copy()
	}
	db.clock = newClock(o.LocalClock)
	if err := db.checkVersion(ctx); err != nil {
		db.end()
		pool.Close()
		return nil, err
	}
	if err := db.clock.measure(ctx, pool); err != nil {
		db.end()
		pool.Close()
		return nil, db.wrap(fmt.Errorf("store: open %s: read the server's clock: %w", db.where, err))
	}
	refresh := o.ClockRefresh
	if refresh <= 0 {
		refresh = DefaultClockRefresh
	}
	db.workers.Go(func() { db.refreshClock(refresh) })
	return db, nil
}

// checkVersion refuses a database whose schema is missing, behind or
// ahead of this idemrun's migrations.
func (db *DB) checkVersion(ctx context.Context) error {
	v, err := schemaVersion(ctx, db.pool, db.schema)
	if err != nil {
		return db.wrap(fmt.Errorf("store: open %s: %w", db.where, err))
	}
	return versionError(db.where, v)
}

// Location returns the database URL without its password, and the schema.
func (db *DB) Location() string { return db.where }

// Schema returns the schema that holds the store's tables.
func (db *DB) Schema() string { return db.schema }

// Close closes the handle's connections once the operations in flight on
// them are done. Every write acknowledged before is committed already,
// and announced: a notification held back for its window is sent first.
// Wakeups' channels close, and the listener and the clock's measurements
// stop.
func (db *DB) Close() error {
	// Queued finishes are acknowledged writes to be: they land first.
	db.later.drain()
	if db.closed.Swap(true) {
		return nil
	}
	db.wake.close()
	db.notify.close()
	db.end()
	db.workers.Wait()
	db.pool.Close()
	return nil
}

// usable returns the error that refuses an operation now, if any.
func (db *DB) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.closed.Load() {
		return fmt.Errorf("%w: %s", store.ErrClosed, db.where)
	}
	return nil
}

// wrap turns an error from the database into the store's: ErrClosed when
// the handle was closed meanwhile, a *ConnectError when no connection
// could be made, store.ErrUnavailable when the connection was lost (see
// classify), and never with the URL's password.
func (db *DB) wrap(err error) error {
	if err == nil {
		return nil
	}
	err = classify(err, false)
	if db.closed.Load() && !errors.Is(err, store.ErrClosed) {
		err = fmt.Errorf("%w: %s: %w", store.ErrClosed, db.where, err)
	}
	return asConnectError(redactor{secrets: db.secrets}.wrap(err), db.where)
}

// tx runs fn in a read committed transaction and commits it when fn
// returns nil. The isolation level is set, not left to the server's
// default: claims rely on read committed's re-check of a row another
// transaction changed, and Enqueue on each statement seeing what
// committed before it.
func (db *DB) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return db.txWith(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

// snapshot runs fn in a read-only repeatable read transaction: reads of
// several statements that see one state of the database.
func (db *DB) snapshot(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return db.txWith(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// txWith runs fn in a transaction of options o. Its errors say what the
// caller may do: a connection lost before COMMIT is store.ErrUnavailable
// (the server rolls the transaction back), one lost at a write's COMMIT
// store.ErrCommitUnknown.
func (db *DB) txWith(ctx context.Context, o pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	if err := db.usable(ctx); err != nil {
		return err
	}
	tx, err := db.pool.BeginTx(ctx, o)
	if err != nil {
		// Nothing was written: a lost connection is ErrUnavailable.
		return db.wrap(fmt.Errorf("store: %s: %w", db.where, err))
	}
	// A no-op after Commit. Not under ctx: a rollback after ctx is
	// canceled would close the connection instead of returning it to the
	// pool.
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		if !strings.HasPrefix(err.Error(), "store: ") {
			// The driver's or the server's error: say where.
			err = fmt.Errorf("store: %s: %w", db.where, err)
		}
		if tx.Conn().PgConn().IsClosed() && ctx.Err() == nil {
			// Before COMMIT nothing can have committed: the server
			// rolls back a transaction whose connection ends.
			err = &faultError{kind: store.ErrUnavailable, err: err}
		}
		return db.wrap(err)
	}
	if db.beforeCommit != nil {
		db.beforeCommit(ctx, tx.Conn().PgConn().PID())
	}
	if err := tx.Commit(ctx); err != nil {
		err = fmt.Errorf("store: %s: commit: %w", db.where, err)
		if !errors.Is(err, pgx.ErrTxCommitRollback) {
			// A COMMIT sent on a connection that then ended may have
			// committed: store.ErrCommitUnknown. A read-only one had
			// nothing to commit.
			err = classify(err, o.AccessMode != pgx.ReadOnly)
		}
		return db.wrap(err)
	}
	return nil
}
