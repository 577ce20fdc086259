package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
)

// The database file is deleted while a process holds it open: the store
// notices the file at its path is gone and refuses to acknowledge (an
// Enqueue that returned nil would be in a file nobody opens again, P1).
func TestFileDeletedWhileOpenRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "del.db")
	c := openAt(t, path, api.Options{})
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("a")}, api.EnqueueOptions{Key: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("b")}, api.EnqueueOptions{Key: "after-delete"})
	acked := err == nil
	c.Close()
	if !acked {
		t.Logf("enqueue after delete refused: %v (good)", err)
		return
	}
	c2, err := api.Open(path, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatalf("enqueue after the delete was acknowledged, and reopening the path fails: %v", err)
	}
	defer c2.Close()
	if _, err := c2.Get(ctx, "after-delete"); err != nil {
		t.Errorf("Enqueue returned nil after %s was deleted, but the job is not in the file at that path after close: %v (P1: acknowledged, not durable)", filepath.Base(path), err)
	}
}

// The file is replaced (an operator restores a backup with mv) while a
// store holds the old one. The lock is on the old inode, so a second store
// can open the new file at the same path; the first one's runner stops
// with store.ErrFailed, sending nothing, so each job is created once.
func TestFileReplacedWhileOpenStopsTheRunner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rep.db")
	ft, err := faketarget.Start(faketarget.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	ctx := context.Background()

	a := openAt(t, path, api.Options{})
	defer a.Close()
	const n = 5
	for i := range n {
		enqueue(t, a, ft.URL()+"/payments", []byte(fmt.Sprintf(`{"amount":%d}`, i)), api.EnqueueOptions{Key: fmt.Sprintf("rep-%d", i)})
	}
	// A backup taken now, later moved over the live file (a "restore").
	bk := filepath.Join(dir, "bk.db")
	f, err := os.Create(bk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Backup(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(bk, path); err != nil {
		t.Fatal(err)
	}

	b, err := api.Open(path, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatalf("the file now at the path cannot be opened: %v", err)
	}
	defer b.Close()
	// The store holding the replaced file refuses to work: its runner
	// stops with store.ErrFailed, sending nothing.
	ra, err := a.NewRunner(baseConfig())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if err := ra.Run(rctx); !errors.Is(err, store.ErrFailed) {
		t.Errorf("runner on the replaced file: %v, want store.ErrFailed", err)
	}
	runUntilIdle(t, b, baseConfig())
	ft.CommitInFlight()
	if d := ft.Duplicates(); len(d) > 0 || ft.TotalCreates() != n {
		t.Errorf("file replaced under a live store: %d creates for %d jobs, duplicated keys %v", ft.TotalCreates(), n, d)
	}
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory (root only).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// A real full disk (small tmpfs), not MaxSize. Acknowledged jobs
// survive, refusals are clear, a runner on the full disk sends nothing
// without its attempt record, and after space is freed every job is created
// exactly once.
func TestRealDiskFull(t *testing.T) {
	dir := mountTmpfs(t, 1<<20)
	path := filepath.Join(dir, "full.db")
	ft, err := faketarget.Start(faketarget.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	ctx := context.Background()
	c := openAt(t, path, api.Options{})
	// A filler takes most of the space, to be freed later.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 700<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"amount":1,"pad":"` + strings.Repeat("x", 8<<10) + `"}`)
	var acked []string
	var full error
	for i := range 200 {
		k := fmt.Sprintf("df-%03d", i)
		_, err := c.Enqueue(ctx, api.Request{URL: ft.URL() + "/payments", Body: body}, api.EnqueueOptions{Key: k})
		if err != nil {
			full = err
			break
		}
		acked = append(acked, k)
	}
	t.Logf("acked %d, refusal: %v", len(acked), full)
	if full == nil {
		t.Fatal("no refusal on a full tmpfs")
	}
	if !strings.Contains(full.Error(), "no space left") || !strings.Contains(full.Error(), "nothing committed") {
		t.Errorf("refusal on a full disk: %q, want ENOSPC named and 'nothing committed'", full)
	}
	// A runner on the full disk for a moment.
	cfg := faultConfig()
	wrote := watchProgress(&cfg)
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, r)
	time.Sleep(500 * time.Millisecond)
	for _, k := range acked {
		j, err := c.Store().GetByKey(k)
		if err != nil {
			t.Fatalf("acked job %s: %v", k, err)
		}
		if n := ft.Creates(k); n > j.Attempts {
			t.Errorf("job %s: %d creates but %d attempts recorded", k, n, j.Attempts)
		}
	}
	// The fault clears.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wrote.waitStats(t, c, runTimeout, fmt.Sprintf("after the disk was freed, want %d succeeded", len(acked)), func(st api.Stats) bool {
		return st["succeeded"] == int64(len(acked))
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if d := ft.Duplicates(); len(d) > 0 {
		t.Errorf("duplicates after the disk was freed: %v", d)
	}
	if ft.TotalCreates() != len(acked) {
		t.Errorf("creates %d, want %d", ft.TotalCreates(), len(acked))
	}
	closeChecked(t, c)
	c2 := openAt(t, path, api.Options{})
	defer closeChecked(t, c2)
	for _, k := range acked {
		jobByKey(t, c2, k)
	}
}

// The disk fills while the runner works (claims and outcomes
// refused mid-flight), then clears; every job is created exactly once.
func TestDiskFillsWhileRunning(t *testing.T) {
	dir := mountTmpfs(t, 2<<20)
	path := filepath.Join(dir, "run.db")
	ft, err := faketarget.Start(faketarget.Config{Faults: faketarget.Faults{Latency: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	ctx := context.Background()
	c := openAt(t, path, api.Options{})
	const n = 300
	body := []byte(`{"amount":1,"pad":"` + strings.Repeat("y", 1<<10) + `"}`)
	for i := range n {
		enqueue(t, c, ft.URL()+"/payments", body, api.EnqueueOptions{Key: fmt.Sprintf("dr-%03d", i)})
	}
	cfg := faultConfig()
	cfg.UntilIdle = false
	cfg.Workers = 8
	wrote := watchProgress(&cfg)
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, r)
	ft.WaitTotalCreates(ctx, 20)
	// Fill the disk to the last byte.
	filler := filepath.Join(dir, "filler")
	f, _ := os.Create(filler)
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	time.Sleep(time.Second)
	before := ft.TotalCreates()
	st, _ := c.Stats(ctx)
	t.Logf("full disk: %d creates so far, stats %v", before, st)
	os.Remove(filler)
	st = wrote.waitStats(t, c, 30*time.Second, "after the disk was freed", func(st api.Stats) bool {
		return st["succeeded"]+st["needs_attention"]+st["failed"] == n
	})
	t.Logf("final stats %v", st)
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if d := ft.Duplicates(); len(d) > 0 {
		t.Errorf("duplicates: %v", d)
	}
	if ft.TotalCreates() != n {
		t.Errorf("creates %d, want %d", ft.TotalCreates(), n)
	}
	closeChecked(t, c)
}
