package demo

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemrun/idemrun/api"
)

// progress prints the live line: done/total, rate, states, as read from
// the store by poll's read function.
type progress struct {
	out   io.Writer
	live  bool
	total int
	start time.Time

	mu   sync.Mutex
	last time.Time
}

// poll shows the counts read returns, five times a second, until ctx
// ends; a failed read shows nothing.
func (p *progress) poll(ctx context.Context, read func(context.Context) (api.Stats, error)) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := read(sctx)
		cancel()
		if err == nil {
			p.show(st)
		}
	}
}

// socketStats reads the counts through the admin socket of the runner
// that holds a bbolt file, dialing it again after a failure; it never
// opens the file, which the runner holds.
type socketStats struct {
	dbPath string
	rem    *api.Client
}

func (s *socketStats) read(ctx context.Context) (api.Stats, error) {
	if s.rem == nil {
		r, err := api.DialSocket(s.dbPath, &api.Options{Warn: io.Discard})
		if err != nil {
			return nil, err
		}
		s.rem = r
	}
	st, err := s.rem.Stats(ctx)
	if err != nil {
		s.close()
	}
	return st, err
}

func (s *socketStats) close() {
	if s.rem != nil {
		s.rem.Close()
		s.rem = nil
	}
}

func (p *progress) show(st api.Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live && time.Since(p.last) < 2*time.Second {
		return
	}
	p.last = time.Now()
	done := st["succeeded"] + st["failed"] + st["canceled"] + st["needs_attention"]
	el := time.Since(p.start).Seconds()
	line := fmt.Sprintf("%6.1fs  done %d/%d  %.0f jobs/s  pending=%d running=%d unknown=%d succeeded=%d failed=%d needs_attention=%d",
		el, done, p.total, float64(done)/el, st["pending"], st["running"], st["unknown"], st["succeeded"], st["failed"], st["needs_attention"])
	if p.live {
		fmt.Fprintf(p.out, "\r\x1b[2K%s", line)
	} else {
		fmt.Fprintln(p.out, line)
	}
}

func (p *progress) note(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start).Seconds()
	if p.live {
		fmt.Fprintf(p.out, "\r\x1b[2K%6.1fs  %s\n", el, msg)
	} else {
		fmt.Fprintf(p.out, "%6.1fs  %s\n", el, msg)
	}
}

func (p *progress) finish() {
	if p.live {
		fmt.Fprintln(p.out)
	}
}
