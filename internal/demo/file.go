package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
)

// file runs the demo on a bbolt file: one runner at a time, each life
// enqueues its wave while no runner holds the file, then runs until its
// SIGKILL; the last runs until idle.
func (r *run) file(ctx context.Context) error {
	cfg := r.cfg
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "idemrun-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	dbPath := filepath.Join(cfg.Dir, "demo.db")
	waves := cfg.Kills + 1
	for wave := 0; wave < waves; wave++ {
		keys, offset := r.wave(wave, waves)
		if err := enqueueWave(ctx, dbPath, r.target, keys, offset); err != nil {
			return err
		}
		final := wave == waves-1
		r.sum.Starts++
		killed, err := runOnce(ctx, cfg, dbPath, final, r.rng, r.prog)
		if err != nil {
			return err
		}
		if killed {
			r.sum.Kills++
		}
	}
	r.finished()
	return verify(dbPath, r.target, r.keys, r.sum)
}

func enqueueWave(ctx context.Context, dbPath string, target *faketarget.Server, keys []string, offset int) error {
	c, err := api.Open(dbPath, &api.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("demo: open %s: %w", dbPath, err)
	}
	defer c.Close()
	return enqueueItems(ctx, c, target, keys, offset)
}

// runOnce starts a runner process. Unless final, it kills it with SIGKILL
// after a random time (or lets it end if it goes idle first); a final
// runner runs until idle.
func runOnce(ctx context.Context, cfg Config, dbPath string, final bool, rng *rand.Rand, prog *progress) (killed bool, err error) {
	args := []string{"run", "--db", dbPath}
	if final {
		// Only the last runner stops by itself; the others run until their
		// SIGKILL, so every run gets exactly Kills kills.
		args = append(args, "--until-idle")
	}
	cmd := exec.Command(cfg.Binary, append(args, cfg.runnerArgs()...)...)
	cmd.Stdout = cfg.RunnerLog
	cmd.Stderr = cfg.RunnerLog
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("demo: start runner: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var stopPoll sync.WaitGroup
	pollCtx, cancelPoll := context.WithCancel(ctx)
	stopPoll.Add(1)
	sock := &socketStats{dbPath: dbPath}
	go func() { defer stopPoll.Done(); defer sock.close(); prog.poll(pollCtx, sock.read) }()
	defer func() { cancelPoll(); stopPoll.Wait() }()

	var killC <-chan time.Time
	if !final {
		span := cfg.KillAfterMax - cfg.KillAfterMin
		d := cfg.KillAfterMin + time.Duration(rng.Int64N(int64(span)+1))
		t := time.NewTimer(d)
		defer t.Stop()
		killC = t.C
	}
	select {
	case err := <-exited:
		if err != nil {
			return false, fmt.Errorf("demo: runner exited: %w", err)
		}
		if !final {
			return false, errors.New("demo: a runner without --until-idle exited by itself")
		}
		return false, nil
	case <-killC:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		prog.note("runner killed with SIGKILL")
		return true, nil
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return false, fmt.Errorf("demo: gave up after %s: %w", cfg.Timeout, ctx.Err())
	}
}
