package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/idemrun/idemrun/internal/fsutil"
	"github.com/idemrun/idemrun/store"
)

// SchemaVersion is the layout version this package writes into the meta
// bucket. A file with a newer version is refused.
const SchemaVersion = 1

var (
	bucketMeta  = []byte("meta")
	bucketJobs  = []byte("jobs")
	bucketKeys  = []byte("keys")
	bucketIndex = []byte("index")
	// bucketTombs orders the key reservations of deleted jobs by deletion
	// time: time | id → key.
	bucketTombs = []byte("tombs")

	metaSchema = []byte("schema")
	metaApp    = []byte("app")
	appName    = []byte("idemrun")
)

// Errors returned by the store. Messages name the file or job and say what to
// do next where they can.
var (
	// ErrLocked: another process holds the file.
	ErrLocked = errors.New("store: database is locked by another process")
	// ErrNotDatabase: the file is not an idemrun database.
	ErrNotDatabase = errors.New("store: not an idemrun database")
	// ErrNewerSchema: the file was written by a newer idemrun.
	ErrNewerSchema = errors.New("store: database schema is newer than this idemrun")
	// ErrNoDatabase: the file does not exist and Options.MustExist was set.
	ErrNoDatabase = errors.New("store: no database file")
)

// Options configures Open. A nil *Options means all defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// file lock before returning ErrLocked. Defaults to 2 seconds.
	LockTimeout time.Duration
	// Mode is the permission of a newly created file. Defaults to 0600.
	Mode fs.FileMode
	// ReadOnly opens the file with a shared lock and refuses writes.
	ReadOnly bool
	// MustExist refuses to create a missing file (ErrNoDatabase).
	MustExist bool
	// MaxBatch is the most operations the writer commits in one
	// transaction. Defaults to 1000.
	MaxBatch int
	// CommitLinger is how long the writer waits for more operations when
	// its batch holds fewer than 32, before it commits: a commit costs two
	// fsyncs whatever its size, so under load a short wait halves the
	// commits. A wait under a millisecond yields the processor to the
	// writing goroutines instead of sleeping (timers fire up to ~1ms late;
	// see timerSlack) and ends early when none of them writes. Defaults to
	// 200µs; a negative value commits at once. With more than 100 expected
	// writers (ExpectWriters), the wait and the batch it waits for grow with
	// them (see lingerFor).
	CommitLinger time.Duration
	// CommitHook, when set, is called inside every write transaction just
	// before it commits; a non-nil error aborts the commit. Tests use it to
	// inject storage faults at the store boundary.
	CommitHook func(ops int) error
	// MaxSize, when positive, refuses commits that would grow the file
	// beyond this many bytes (bbolt's Options.MaxSize).
	MaxSize int
	// SyncDir, when set, replaces the directory sync (fsutil.SyncDir) that
	// a writable Open does before it takes writes and Compact does after
	// its rename. A test and fault hook: tests count the syncs or fail one.
	SyncDir func(dir string) error
	// CompactBeforeRename, when set, is called by Compact after the
	// compacted copy has been written and checked, while Compact holds
	// the lock of the file and of the copy, just before the copy is
	// renamed over the file. A test hook: tests start a concurrent Open
	// there.
	CompactBeforeRename func()

	// replaced counts the opens given up because the file was replaced
	// while they waited for its lock (Compact).
	replaced int
	// lockDeadline ends the wait for the lock across those reopens, so
	// LockTimeout bounds the whole Open.
	lockDeadline time.Time
}

// DB is an open idemrun database.
type DB struct {
	path string
	bolt *bbolt.DB
	opts Options

	ops     chan *op
	quit    chan struct{}
	stopped chan struct{}

	closeOnce sync.Once
	closeErr  error
	mu        sync.RWMutex // guards closed against enqueueing ops
	closed    bool
	file      os.FileInfo           // the file bbolt holds, to notice a delete or replace
	absPath   string                // path made absolute at Open, whatever the cwd later
	failed    atomic.Pointer[error] // set once by the writer: see ErrFailed
	lastTx    int                   // id of the writer's last write transaction

	commits   atomic.Uint64
	committed atomic.Uint64 // operations acknowledged
	writers   atomic.Int64  // expected concurrent writers (ExpectWriters)
	counts    counts        // counter changes of the writer's transaction
	observer  atomic.Pointer[func(d time.Duration, ops int)]

	claiming sync.Map // ids a ClaimDue is claiming, for overlapping rounds to pass over
	leases   leases
}

// SetCommitObserver registers fn to be told the duration and size of every
// committed write transaction (for metrics). It replaces any earlier one.
func (db *DB) SetCommitObserver(fn func(d time.Duration, ops int)) {
	db.observer.Store(&fn)
}

// Open opens or creates the idemrun database at path.
func Open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 2 * time.Second
	}
	if o.lockDeadline.IsZero() {
		o.lockDeadline = time.Now().Add(o.LockTimeout)
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1000
	}
	if o.CommitLinger == 0 {
		o.CommitLinger = 200 * time.Microsecond
	}
	fi, err := os.Stat(path)
	existed := err == nil
	switch {
	case err == nil && fi.IsDir():
		return nil, fileErr(path, FileIsDirectory, fmt.Errorf("%w: %s is a directory, not a database file", ErrNotDatabase, path))
	case err == nil && fi.Size() > 0 && fi.Size() < 4096*2:
		return nil, fileErr(path, FileDamaged, fmt.Errorf("%w: %s is %d bytes, too small to be a bbolt file; check the path", ErrNotDatabase, path, fi.Size()))
	case err == nil && fi.Size() == 0 && (o.MustExist || o.ReadOnly):
		return nil, fileErr(path, FileEmpty, fmt.Errorf("%w: %s is empty (0 bytes), not yet an idemrun database; check the path", ErrNotDatabase, path))
	case err != nil && errors.Is(err, fs.ErrNotExist) && (o.MustExist || o.ReadOnly):
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoDatabase, path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	bo := &bbolt.Options{
		Timeout:  o.LockTimeout,
		ReadOnly: o.ReadOnly,
		// The array freelist hands out the lowest free pages first, so a
		// commit's dirty pages land close together and the fsync that
		// follows costs less than for pages scattered over the file (the
		// hashmap freelist's order; BENCHMARKS.md, "Decisions"). Its one
		// cost, a linear search of the free pages on each allocation, is no
		// larger than what both types pay on every commit for writing the
		// whole freelist. The freelist type is not part of the file format.
		FreelistType:   bbolt.FreelistArrayType,
		NoFreelistSync: false,
		MaxSize:        o.MaxSize,
	}
	// opened is the file bbolt opens and locks, compared below with the
	// file at path once the lock is held.
	var opened *os.File
	bo.OpenFile = func(name string, flag int, perm fs.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		opened = f
		return f, err
	}
	if existed && fi.Size() > 0 {
		if err := checkTruncated(path, fi.Size()); err != nil {
			return nil, err
		}
		if err := checkFreelistPage(path); err != nil {
			return nil, err
		}
	}
	bdb, err := openBolt(path, o.Mode, bo)
	if err != nil {
		switch {
		case errors.Is(err, bolterrors.ErrTimeout):
			return nil, fmt.Errorf("%w: %s is held by another process after waiting %s (%s); stop it, or talk to it through its admin socket", ErrLocked, path, o.LockTimeout, lockHolder(path))
		case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrChecksum):
			return nil, fileErr(path, FileDamaged, fmt.Errorf("%w: %s: %v: the file is not a bbolt file, or a damaged one", ErrNotDatabase, path, err))
		case errors.Is(err, store.ErrCorrupt):
			return nil, err
		default:
			return nil, fileErr(path, FileDamaged, fmt.Errorf("store: open %s: %w", path, err))
		}
	}

	// The lock is on the file opened, which is no longer the one at path
	// if Compact renamed its copy over it while this open waited for the
	// lock: writing to it would write to a deleted file. Open the file now
	// at path instead. (The held file itself is compared: a stat of path
	// taken before the open could match a new file that reused a freed
	// inode number.)
	held, herr := opened.Stat()
	if now, err := os.Stat(path); err != nil || herr != nil || !os.SameFile(held, now) {
		bdb.Close()
		if o.replaced >= 3 {
			return nil, fmt.Errorf("store: open %s: the file was replaced %d times while waiting for its lock; try again", path, o.replaced+1)
		}
		o.replaced++
		// What is left of the wait; at least a moment, for the new file's
		// lock is usually free.
		o.LockTimeout = max(time.Until(o.lockDeadline), 10*time.Millisecond)
		return Open(path, &o)
	}
	abs, aerr := filepath.Abs(path)
	if aerr != nil {
		abs = path
	}
	db := &DB{path: path, absPath: abs, bolt: bdb, opts: o, file: held}
	if err := db.init(); err != nil {
		bdb.Close()
		return nil, err
	}
	if !o.ReadOnly {
		// The file's directory entry is durable only once its directory
		// is synced: a new file's, and one laid out by a process killed
		// before it synced. A sync of a directory costs one fsync, once.
		if err := o.syncDir(filepath.Dir(abs)); err != nil {
			bdb.Close()
			return nil, fmt.Errorf("store: open %s: syncing its directory: %w", path, err)
		}
	}
	if !o.ReadOnly {
		db.ops = make(chan *op, 4*o.MaxBatch)
		db.quit = make(chan struct{})
		db.stopped = make(chan struct{})
		go db.writer()
	}
	return db, nil
}

// init checks the file's meta bucket, or lays out a new file.
func (db *DB) init() error {
	check := func(tx *bbolt.Tx) (fresh bool, err error) {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil })
			if !empty {
				return false, fmt.Errorf("%w: %s is a bbolt file of another program (no idemrun meta bucket)", ErrNotDatabase, db.path)
			}
			return true, nil
		}
		if string(meta.Get(metaApp)) != string(appName) {
			return false, fmt.Errorf("%w: %s has a meta bucket that is not idemrun's", ErrNotDatabase, db.path)
		}
		v := meta.Get(metaSchema)
		if len(v) != 4 {
			return false, fmt.Errorf("%w: %s has no valid schema version", ErrNotDatabase, db.path)
		}
		if n := binary.BigEndian.Uint32(v); n > SchemaVersion {
			return false, fmt.Errorf("%w: %s has schema %d, this idemrun reads up to %d; upgrade idemrun", ErrNewerSchema, db.path, n, SchemaVersion)
		}
		for _, b := range [][]byte{bucketJobs, bucketKeys, bucketIndex} {
			if tx.Bucket(b) == nil {
				return false, fileErr(db.path, FileDamaged, fmt.Errorf("%w: %s lacks bucket %q: the file is damaged", ErrNotDatabase, db.path, b))
			}
		}
		return false, nil
	}
	var fresh bool
	err := db.view(func(tx *bbolt.Tx) error {
		var err error
		fresh, err = check(tx)
		return err
	})
	if err != nil || !fresh {
		return err
	}
	// The tree bbolt opened holds nothing. That is a new file, or one
	// whose first idemrun commit never landed (no job is committed
	// before the layout is). But if job records sit in the file's pages,
	// bbolt fell back from a damaged newest meta page to an older, empty
	// one, and the jobs are where this tree cannot reach them: laying out
	// a fresh database would hide them for good.
	if n := jobRecordsIn(db.path, db.bolt.Info().PageSize); n > 0 {
		return fileErr(db.path, FileDamaged, fmt.Errorf("%w: %s: its tree is empty, but %d job records are in its pages: the newest meta page is damaged and bbolt fell back to an older, empty one; restore from a backup", store.ErrCorrupt, db.path, n))
	}
	if db.opts.ReadOnly {
		return fileErr(db.path, FileEmpty, fmt.Errorf("%w: %s is empty", ErrNotDatabase, db.path))
	}
	if db.opts.MustExist {
		// Only a command that may create the file lays it out: a read
		// or an admin command leaves an empty file as it found it.
		return fileErr(db.path, FileEmpty, fmt.Errorf("%w: %s is an empty bbolt file, not yet an idemrun database", ErrNotDatabase, db.path))
	}
	return db.update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		v := make([]byte, 4)
		binary.BigEndian.PutUint32(v, SchemaVersion)
		if err := meta.Put(metaSchema, v); err != nil {
			return err
		}
		if err := meta.Put(metaApp, appName); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketJobs, bucketKeys, bucketIndex} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// Path returns the file the store was opened from.
func (db *DB) Path() string { return db.path }

// Location is the file's path, as given to Open (store.Located).
func (db *DB) Location() string { return db.path }

// Close stops the writer after it has committed every queued operation, then
// closes the file.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		if db.quit != nil {
			close(db.quit)
			<-db.stopped
		}
		db.closeErr = db.bolt.Close()
	})
	return db.closeErr
}

// Counters reports the writer's work so far: transactions committed and
// operations acknowledged. Benchmarks divide them to get commits per job.
func (db *DB) Counters() (commits, ops uint64) {
	return db.commits.Load(), db.committed.Load()
}

// Backup writes a consistent copy of the database to w while other work goes
// on (bbolt's Tx.WriteTo in a read transaction).
func (db *DB) Backup(w io.Writer) (int64, error) {
	var n int64
	err := db.view(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// lockHolder names the process holding path's lock, from /proc/locks where
// the system has one.
func lockHolder(path string) string {
	pid := lockHolderPID(path)
	if pid <= 0 {
		return "holder unknown"
	}
	name := ""
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		name = string(trimNL(b))
	}
	if name != "" {
		return fmt.Sprintf("pid %d, %s", pid, name)
	}
	return fmt.Sprintf("pid %d", pid)
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// view runs a read transaction for a caller of the store: on a closed
// store it is refused with store.ErrClosed, as writes are.
func (db *DB) view(fn func(tx *bbolt.Tx) error) error {
	if err := db.open(); err != nil {
		return err
	}
	err := db.read(fn)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		// Close ran between the check and the transaction.
		return fmt.Errorf("%w: %s", store.ErrClosed, db.path)
	}
	return err
}

// read runs a read transaction, also while Close drains the writer (whose
// commits read). bbolt panics on damaged pages; the panic becomes an error
// naming the file, so a corrupt database is reported, not a crash.
func (db *DB) read(fn func(tx *bbolt.Tx) error) (err error) {
	defer db.recoverCorrupt(&err)
	err = db.bolt.View(fn)
	if errors.Is(err, ErrCorruptRecord) {
		err = fileErr(db.path, FileDamaged, fmt.Errorf("%w (in %s); Check reports the damage", err, db.path))
	}
	return err
}

// open returns store.ErrClosed once Close has begun.
func (db *DB) open() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return store.ErrClosed
	}
	return nil
}

// update runs a write transaction (only the writer goroutine and init).
func (db *DB) update(fn func(tx *bbolt.Tx) error) (err error) {
	defer db.recoverCorrupt(&err)
	return db.bolt.Update(fn)
}

func (db *DB) recoverCorrupt(err *error) {
	if r := recover(); r != nil {
		if cp, ok := r.(callerPanic); ok {
			*err = fmt.Errorf("store: a function of the caller's panicked inside a transaction on %s (the file is not damaged; nothing of that transaction was committed): %v\n%s", db.path, cp.v, cp.stack)
			return
		}
		*err = fileErr(db.path, FileDamaged, fmt.Errorf("%w: %s: %v; Check reports the damage, a backup restores what is lost", store.ErrCorrupt, db.path, r))
	}
}

// callerPanic is a panic raised by a caller's function that the store ran
// inside a transaction (inCaller).
type callerPanic struct {
	v     any
	stack []byte
}

// inCaller runs fn, code of the store's caller (a TransitionFunc, a
// ClaimFunc, a skip test), inside a transaction. Its panic goes on, marked
// as the caller's: update and view report other panics as a damaged file
// (bbolt panics on bad pages), and a bug in the caller's code is not that.
func inCaller(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(callerPanic); ok {
				panic(r)
			}
			panic(callerPanic{v: r, stack: debug.Stack()})
		}
	}()
	fn()
}

// openBolt is bbolt.Open with its panics on damaged files turned into
// errors.
func openBolt(path string, mode fs.FileMode, bo *bbolt.Options) (db *bbolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fileErr(path, FileDamaged, fmt.Errorf("%w: %s: %v; restore from a backup", store.ErrCorrupt, path, r))
		}
	}()
	return bbolt.Open(path, mode, bo)
}

// syncDir makes a directory's entries durable: Options.SyncDir, or
// fsutil.SyncDir.
func (o *Options) syncDir(dir string) error {
	if o.SyncDir != nil {
		return o.SyncDir(dir)
	}
	return fsutil.SyncDir(dir)
}

// metaHead is what idemrun reads of one bbolt meta page before bbolt opens
// the file. The layout is bbolt's on-disk format: a 16-byte page header,
// then magic, version, page size, flags, the root bucket (16 bytes), the
// freelist page id, the high-water page id, the transaction id and an
// FNV-1a checksum of the fields before it.
type metaHead struct {
	page     int // 0 or 1
	pageSize int64
	hwm      int64  // pages in use as this meta page saw them
	freelist uint64 // the freelist's page id
	txid     uint64
	ok       bool // the checksum matches
}

// readMetaHeads reads the meta pages of the bbolt file at path that carry
// bbolt's magic: the first at offset 0, the second one page in.
func readMetaHeads(path string) []metaHead {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt will report it
	}
	defer f.Close()
	const magic = 0xED0CDAED
	var out []metaHead
	buf := make([]byte, 80)
	pageSize := int64(0)
	for page := range 2 {
		if page == 1 && pageSize == 0 {
			// The second meta page sits one page in. With the first
			// unreadable, bbolt tries 1 KiB, 2 KiB, ... for a meta page
			// that names its own offset as the page size.
			for off := int64(1024); off <= 1<<24 && pageSize == 0; off <<= 1 {
				if _, err := f.ReadAt(buf, off); err == nil && binary.LittleEndian.Uint32(buf[16:20]) == magic && int64(binary.LittleEndian.Uint32(buf[24:28])) == off {
					pageSize = off
				}
			}
			if pageSize == 0 {
				break
			}
		}
		if _, err := f.ReadAt(buf, int64(page)*pageSize); err != nil {
			break
		}
		if binary.LittleEndian.Uint32(buf[16:20]) != magic {
			continue
		}
		h := fnv.New64a()
		h.Write(buf[16:72])
		m := metaHead{page: page, pageSize: int64(binary.LittleEndian.Uint32(buf[24:28])), hwm: int64(binary.LittleEndian.Uint64(buf[56:64])),
			freelist: binary.LittleEndian.Uint64(buf[48:56]), txid: binary.LittleEndian.Uint64(buf[64:72]), ok: h.Sum64() == binary.LittleEndian.Uint64(buf[72:80])}
		if m.pageSize > 0 && m.hwm > 0 && m.hwm < 1<<40 {
			out = append(out, m)
			if pageSize == 0 {
				pageSize = m.pageSize
			}
		}
	}
	return out
}

// jobRecordsIn counts the job records in the leaf pages of the bbolt file
// at path, reachable or not: 16-byte keys whose values carry a job record
// head. It reads the whole file; Open uses it only on a file whose tree is
// empty.
func jobRecordsIn(path string, pageSize int) int {
	f, err := os.Open(path)
	if err != nil || pageSize < 1024 {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	size, ps := fi.Size(), int64(pageSize)
	const leafFlag, bucketFlag = 0x02, 0x01
	n := 0
	buf := make([]byte, ps)
	for off := 2 * ps; off+ps <= size; {
		if _, err := f.ReadAt(buf[:ps], off); err != nil {
			return n
		}
		step := ps
		if binary.LittleEndian.Uint16(buf[8:10])&leafFlag != 0 {
			count := int64(binary.LittleEndian.Uint16(buf[10:12]))
			span := ps * (1 + int64(binary.LittleEndian.Uint32(buf[12:16])))
			if off+span > size {
				span = ps // a damaged header: read the page alone, go on
			}
			page := buf[:ps]
			if span > ps {
				page = make([]byte, span)
				if _, err := f.ReadAt(page, off); err != nil {
					page = buf[:ps]
				}
			}
			n += jobRecordsOnLeaf(page, count, bucketFlag)
			step = span
		}
		off += step
	}
	return n
}

// jobRecordsOnLeaf counts the elements of a leaf page that look like job
// records: not a bucket, a 16-byte key, a value with a record head. All
// offsets are checked in int64, so no header can point outside page.
func jobRecordsOnLeaf(page []byte, count int64, bucketFlag uint32) int {
	n := 0
	size := int64(len(page))
	for i := int64(0); i < count; i++ {
		e := 16 + 16*i
		if e+16 > size {
			break
		}
		eflags := binary.LittleEndian.Uint32(page[e:])
		pos := int64(binary.LittleEndian.Uint32(page[e+4:]))
		ksize := int64(binary.LittleEndian.Uint32(page[e+8:]))
		vsize := int64(binary.LittleEndian.Uint32(page[e+12:]))
		k := e + pos
		if eflags&bucketFlag != 0 || ksize != 16 || k+ksize+vsize > size {
			continue
		}
		if _, ok := parseHead(page[k+ksize : k+ksize+vsize]); ok {
			n++
		}
	}
	return n
}

// checkTruncated refuses a file shorter than its bbolt meta pages say. bbolt
// maps the file and reads pages past a truncated end, which kills the
// process with SIGBUS, a fault no recover can catch; so the size is checked
// before bbolt sees the file.
// checkFreelistPage refuses a file whose current meta page points at a
// freelist page that is not one. bbolt panics on it after it has opened,
// locked and mapped the file, and the handle it never returns keeps the
// lock (the mapping holds the file open) until the garbage collector
// finds it: every later open in this process would read as "locked".
func checkFreelistPage(path string) error {
	var cur *metaHead
	heads := readMetaHeads(path)
	for i := range heads {
		if heads[i].ok && (cur == nil || heads[i].txid > cur.txid) {
			cur = &heads[i]
		}
	}
	const noFreelist = 0xffffffffffffffff // NoFreelistSync files keep none
	if cur == nil || cur.freelist == noFreelist {
		return nil // bbolt reports a file without a sound meta page
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it
	}
	defer f.Close()
	var hdr [16]byte
	const freelistPageFlag = 0x10
	_, rerr := f.ReadAt(hdr[:], int64(cur.freelist)*cur.pageSize)
	if rerr != nil || int64(cur.freelist) >= cur.hwm || binary.LittleEndian.Uint16(hdr[8:10])&freelistPageFlag == 0 {
		return fileErr(path, FileDamaged, fmt.Errorf("%w: %s: its freelist page %d is damaged; restore from a backup", store.ErrCorrupt, path, cur.freelist))
	}
	return nil
}

func checkTruncated(path string, size int64) error {
	var need int64
	for _, m := range readMetaHeads(path) {
		need = max(need, m.hwm*m.pageSize)
	}
	if need > size {
		return fileErr(path, FileDamaged, fmt.Errorf("%w: %s is truncated: %d bytes, its header says %d; restore from a backup", store.ErrCorrupt, path, size, need))
	}
	return nil
}
