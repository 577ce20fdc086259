package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// These tests make a real disk fault: they need root (a tmpfs, a loop
// device, mkfs.ext4) and skip without them.

// fsyncRig is an ext4 file system on a loop device whose backing file lives
// on a small tmpfs. When the tmpfs is full, a writeback to a block of the
// image that is not yet backed fails, and fdatasync returns an error (the
// page then counts as clean: a later fdatasync succeeds without it).
type fsyncRig struct {
	t       *testing.T
	tdir    string // tmpfs
	img     string
	dev     string
	mnt     string
	fillerN int
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func newFsyncRig(t *testing.T) *fsyncRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (tmpfs, loop device)")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "filefrag", "fallocate"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("no " + tool)
		}
	}
	base := t.TempDir()
	r := &fsyncRig{t: t, tdir: filepath.Join(base, "t"), mnt: filepath.Join(base, "m")}
	os.Mkdir(r.tdir, 0o700)
	os.Mkdir(r.mnt, 0o700)
	// The rig is set up with setup, which skips the test when this
	// machine cannot make it (no tmpfs mounts, no loop devices).
	setup := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Skipf("cannot make a failing disk here: %s %v: %v %s", name, args, err, out)
		}
		return string(out)
	}
	setup("mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", r.tdir)
	t.Cleanup(func() { exec.Command("umount", "-l", r.tdir).Run() })
	r.img = filepath.Join(r.tdir, "img")
	setup("truncate", "-s", "64M", r.img)
	setup("mkfs.ext4", "-q", "-F", "-b", "4096", "-O", "^has_journal", "-E", "nodiscard,lazy_itable_init=1", r.img)
	r.dev = strings.TrimSpace(setup("losetup", "-f", "--show", r.img))
	t.Cleanup(func() { exec.Command("losetup", "-d", r.dev).Run() })
	setup("mount", "-o", "errors=continue", r.dev, r.mnt)
	t.Cleanup(func() { exec.Command("umount", "-l", r.mnt).Run() })
	// Back every free block of the file system, so that later writes land
	// in blocks the tmpfs already holds.
	exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(r.mnt, "pre"), "bs=1M").Run()
	sh(t, "sync")
	os.Remove(filepath.Join(r.mnt, "pre"))
	sh(t, "sync")
	return r
}

func (r *fsyncRig) mount() {
	sh(r.t, "mount", "-o", "errors=continue", r.dev, r.mnt)
	r.t.Cleanup(func() { exec.Command("umount", "-l", r.mnt).Run() })
}

// remount drops the file system's page cache: what is read next comes from
// the image, as after a power loss.
func (r *fsyncRig) remount() {
	sh(r.t, "umount", r.mnt)
	r.mount()
}

// fillTmpfs fills the tmpfs to the last byte.
func (r *fsyncRig) fillTmpfs() {
	r.fillerN++
	f, err := os.Create(filepath.Join(r.tdir, fmt.Sprintf("filler-%d", r.fillerN)))
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// physBlock is the image block holding logical block lb of file.
func (r *fsyncRig) physBlock(file string, lb int64) int64 {
	out := sh(r.t, "filefrag", "-v", "-b4096", file)
	re := regexp.MustCompile(`^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*(\d+):`)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		l0, _ := strconv.ParseInt(m[1], 10, 64)
		l1, _ := strconv.ParseInt(m[2], 10, 64)
		p0, _ := strconv.ParseInt(m[3], 10, 64)
		if lb >= l0 && lb <= l1 {
			return p0 + lb - l0
		}
	}
	r.t.Fatalf("no extent for block %d of %s:\n%s", lb, file, out)
	return 0
}

// unback punches block pb out of the image, so its next writeback fails
// while the tmpfs is full.
func (r *fsyncRig) unback(pb int64) {
	sh(r.t, "fallocate", "-p", "-o", strconv.FormatInt(pb*4096, 10), "-l", "4096", r.img)
}

// failWriteback makes the next writeback of page lb of file fail: the
// tmpfs under the image is filled, the page's block punched out of the
// image, and the tmpfs filled again.
func (r *fsyncRig) failWriteback(file string, lb int64) {
	pb := r.physBlock(file, lb)
	r.fillTmpfs()
	r.unback(pb)
	r.fillTmpfs()
}

// storeThenFailNextMeta stores three jobs through c and syncs them, then
// makes the next commit's meta page fail its writeback (its fdatasync
// fails after the data pages were synced).
func (r *fsyncRig) storeThenFailNextMeta(c *api.Client, path string) {
	for i := range 3 {
		if _, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("base")}, api.EnqueueOptions{Key: fmt.Sprintf("base-%d", i)}); err != nil {
			r.t.Fatal(err)
		}
	}
	sh(r.t, "sync")
	r.failWriteback(path, nextMetaPage(r.t, path))
}

// nextMetaPage is the bbolt meta page the next commit of the file writes.
func nextMetaPage(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tx0 := binary.LittleEndian.Uint64(b[64:72])
	tx1 := binary.LittleEndian.Uint64(b[4096+64 : 4096+72])
	return int64((max(tx0, tx1) + 1) % 2)
}

// fdatasync fails after bbolt wrote the meta page (the data pages were
// synced; the meta page's writeback fails). bbolt rolls back in memory,
// but the meta page it wrote is in the page cache that its map reads, so
// the failed transaction is visible. Re-run alone, each operation of the
// batch would find its job already there and be acknowledged with nothing
// durable; instead the store fails every operation (store.ErrFailed) and
// takes no more writes. After a power loss (remount) nothing acknowledged
// is missing (P1).
func TestMetaFsyncFailureAcknowledgesNothing(t *testing.T) {
	r := newFsyncRig(t)
	path := filepath.Join(r.mnt, "f.db")
	ctx := context.Background()
	c := openAt(t, path, api.Options{Store: &bolt.Options{CommitLinger: 50 * time.Millisecond}})
	r.storeThenFailNextMeta(c, path)

	db := c.Store().(*bolt.DB)
	commits0, _ := db.Counters()
	// Two enqueues at once: one batch, one commit.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("x")}, api.EnqueueOptions{Key: fmt.Sprintf("x-%d", i)})
		}()
	}
	wg.Wait()
	commits1, _ := db.Counters()
	t.Logf("enqueue results after the meta fsync failed: %v (commits acknowledged by the writer meanwhile: %d)", errs, commits1-commits0)
	if commits1 != commits0 {
		t.Fatalf("the batch committed: the fault did not hit")
	}
	// A caller that retries a refused enqueue (what the error invites):
	res, rerr := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("x")}, api.EnqueueOptions{Key: "x-0"})
	t.Logf("retry of x-0: existing=%v err=%v", res.Existing, rerr)
	var acked []string
	for i, e := range errs {
		if e == nil {
			acked = append(acked, fmt.Sprintf("x-%d", i))
		}
	}
	if rerr == nil && errs[0] != nil {
		acked = append(acked, "x-0 (on retry)")
	}
	c.Close()
	// Power loss: the page cache is gone.
	r.remount()
	c2, err := api.Open(path, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatalf("reopen after remount: %v", err)
	}
	defer c2.Close()
	for i := range 3 {
		if _, err := c2.Get(ctx, fmt.Sprintf("base-%d", i)); err != nil {
			t.Errorf("base-%d lost: %v", i, err)
		}
	}
	var lost []string
	for _, k := range []string{"x-0", "x-1"} {
		if _, err := c2.Get(ctx, k); errors.Is(err, store.ErrNotFound) {
			lost = append(lost, k)
		}
	}
	t.Logf("acknowledged: %v; absent after power loss: %v", acked, lost)
	for _, k := range acked {
		for _, l := range lost {
			if strings.HasPrefix(k, l) {
				t.Errorf("Enqueue(%s) returned nil after the commit's fdatasync failed, and the job is not on disk (P1)", k)
			}
		}
	}
	_ = bytes.MinRead
}

// The file is made immutable (chattr +i; chmod has no effect on an
// open descriptor) while a runner works, then writable again.
func TestImmutableFileWhileRunning(t *testing.T) {
	r := newFsyncRig(t)
	path := filepath.Join(r.mnt, "ro.db")
	ctx := context.Background()
	ft := newCountingTarget(t)
	c := openAt(t, path, api.Options{})
	const n = 200
	for i := range n {
		enqueue(t, c, ft.url(), []byte(`{"a":1}`), api.EnqueueOptions{Key: fmt.Sprintf("im-%03d", i)})
	}
	slow := make(chan struct{})
	var once sync.Once
	ft.onRequest = func() {
		once.Do(func() { close(slow) })
		time.Sleep(20 * time.Millisecond)
	}
	cfg := faultConfig()
	cfg.UntilIdle = false
	cfg.Workers = 4
	wrote := watchProgress(&cfg)
	rn, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, rn)
	<-slow
	sh(t, "chattr", "+i", path)
	_, eerr := c.Enqueue(ctx, api.Request{URL: ft.url(), Body: []byte("z")}, api.EnqueueOptions{Key: "im-during"})
	t.Logf("enqueue while immutable: %v", eerr)
	if eerr == nil {
		t.Errorf("enqueue on an immutable file acknowledged")
	}
	time.Sleep(time.Second)
	mid := ft.n.Load()
	time.Sleep(300 * time.Millisecond)
	if d := ft.n.Load() - mid; d > 4 {
		t.Errorf("target got %d more requests while no claim could be committed", d)
	}
	sh(t, "chattr", "-i", path)
	wrote.waitStats(t, c, 30*time.Second, "after the file became writable", func(st api.Stats) bool { return st["succeeded"] == n })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	for i := range n {
		if k := fmt.Sprintf("im-%03d", i); ft.requestsFor(k) != 1 {
			t.Errorf("%s: %d requests", k, ft.requestsFor(k))
		}
	}
	closeChecked(t, c)
}

// A runner works while a commit's meta fdatasync fails (one meta page's
// block cannot be written back). The runner stops with store.ErrFailed;
// after the fault clears, a restart ends every job, each sent at most once.
func TestRunnerStopsOnMetaFsyncFailure(t *testing.T) {
	r := newFsyncRig(t)
	path := filepath.Join(r.mnt, "run.db")
	ctx := context.Background()
	ft := newCountingTarget(t)
	c := openAt(t, path, api.Options{})
	const n = 100
	for i := range n {
		// An attempt timeout beyond the hold below: a held request must not
		// time out (and end unknown) before the fault is armed.
		enqueue(t, c, ft.url(), []byte(`{"a":1}`), api.EnqueueOptions{Key: fmt.Sprintf("mf-%03d", i), AttemptTimeout: 2 * runTimeout})
	}
	sh(t, "sync")
	// The target holds its answers from the 11th request on until the
	// fault is armed, so the runner still has outcomes to commit (and meta
	// pages to write) once the meta page's writeback fails. Without the
	// hold, a slow failWriteback on a loaded machine could let the runner
	// finish all n jobs first, commit nothing while the fault lasted, and
	// never stop (seen once under make test).
	started := make(chan struct{}, 1000)
	armed := make(chan struct{})
	var arm sync.Once
	defer arm.Do(func() { close(armed) }) // a failure before arming frees the handlers
	var reqs atomic.Int64
	ft.onRequest = func() {
		select {
		case started <- struct{}{}:
		default:
		}
		if reqs.Add(1) > 10 {
			select {
			case <-armed:
			case <-time.After(runTimeout):
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg := faultConfig()
	cfg.UntilIdle = false
	cfg.Workers = 4
	rn, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- rn.Run(rctx) }()
	waitFor(t, started, 11, "first requests")
	r.failWriteback(path, 0)
	arm.Do(func() { close(armed) })
	time.Sleep(2 * time.Second)
	for i := 1; i <= r.fillerN; i++ {
		os.Remove(filepath.Join(r.tdir, fmt.Sprintf("filler-%d", i)))
	}
	// The store fails its writes from the first commit whose meta page
	// could not be synced, and the runner stops with store.ErrFailed
	// instead of working on a view of the file the disk may not hold.
	var err2 error
	select {
	case err2 = <-runErr:
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not stop within 30 s of a failed meta fsync")
	}
	if !errors.Is(err2, store.ErrFailed) {
		t.Errorf("Run after a failed meta fsync: %v, want store.ErrFailed", err2)
	}
	for i := range n {
		if k := fmt.Sprintf("mf-%03d", i); ft.requestsFor(k) > 1 {
			t.Errorf("%s: %d requests", k, ft.requestsFor(k))
		}
	}
	c.Close()
	// Restart on the healed disk: every job ends, each sent at most once;
	// only the few in flight when the store failed (claimed, perhaps sent,
	// outcome not recorded) are left for a person.
	c2 := openAt(t, path, api.Options{})
	defer c2.Close()
	runUntilIdle(t, c2, baseConfig())
	st2, _ := c2.Stats(ctx)
	t.Logf("after a restart: %v; target requests %d", st2, ft.n.Load())
	if st2["succeeded"]+st2["needs_attention"] != n || st2["needs_attention"] > int64(cfg.Workers) {
		t.Errorf("after a restart: %v, want every job succeeded but at most %d (the ones in flight) needs_attention", st2, cfg.Workers)
	}
	for i := range n {
		if k := fmt.Sprintf("mf-%03d", i); ft.requestsFor(k) > 1 {
			t.Errorf("%s: %d requests after the restart", k, ft.requestsFor(k))
		}
	}
}
