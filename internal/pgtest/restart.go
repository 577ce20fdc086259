package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Restart crash-restarts the server: `pg_ctl stop -m immediate` (every
// server process quits at once, without a checkpoint, as in a crash), then
// the same server on the same port, which recovers from its WAL. Sessions
// end with an error; the URL stays the same. It returns once the server
// answers a query again, or with an error when ctx ends first. Not safe
// to call concurrently with itself or Stop.
//
// The new server is started by Restart itself, not by `pg_ctl restart`:
// pg_ctl would detach it from this process, so it would not die with a
// test binary killed on a timeout, and Stop could not reach it.
func (s *Server) Restart(ctx context.Context) error { return s.RestartAfter(ctx, 0) }

// RestartAfter is Restart with the server down for the pause between its
// crash and its start: an outage longer than the clients' leases or
// timeouts. ctx bounds the pause too.
func (s *Server) RestartAfter(ctx context.Context, pause time.Duration) error {
	if s.cmd == nil {
		return errors.New("pgtest: restart: the server is not running")
	}
	if err := s.stopImmediate(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("pgtest: restart: the server is down: %w", ctx.Err())
	case <-time.After(pause):
	}
	// Postgres listens with SO_REUSEADDR, so its own port is free again at
	// once; another process may still take it meanwhile: then try again
	// while ctx allows, a bounded number of times.
	var err error
	for try := 0; try < 10; try++ {
		if err = s.launch(ctx, s.port); err == nil || !strings.Contains(s.logTail(), "could not bind") {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: restart: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("pgtest: restart: %w", err)
	}
	return nil
}

// stopImmediate runs `pg_ctl stop -m immediate` as the server's user and
// waits for the postmaster to exit.
func (s *Server) stopImmediate(ctx context.Context) error {
	wait := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Second)
	}
	stop := exec.CommandContext(ctx, filepath.Join(s.bin, exe("pg_ctl")), "stop", "-D", s.data, "-m", "immediate",
		"-w", "-t", strconv.Itoa(int(wait.Seconds())+1))
	stop.Dir = s.dir // the caller's directory may be closed to that user
	stop.Env = append(stop.Environ(), "LC_ALL=C")
	if err := runAs(stop, s.as); err != nil {
		return err
	}
	if out, err := stop.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m immediate: %w\n%s\n%s", err, out, s.logTail())
	}
	select {
	case <-s.done:
		s.cmd, s.done = nil, nil
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pgtest: restart: the server did not exit after pg_ctl stop -m immediate: %w", ctx.Err())
	}
}
