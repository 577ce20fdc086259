package demo

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemrun/idemrun/api"
)

// progress prints the live line: done/total, rate, states. It reads the
// counts through the running runner's admin socket.
type progress struct {
	out   io.Writer
	live  bool
	total int
	start time.Time

	mu   sync.Mutex
	last time.Time
}

func (p *progress) poll(ctx context.Context, dbPath string) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	var rem *api.Client
	defer func() {
		if rem != nil {
			rem.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if rem == nil {
			r, err := api.DialSocket(dbPath, &api.Options{Warn: io.Discard})
			if err != nil {
				continue
			}
			rem = r
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := rem.Stats(sctx)
		cancel()
		if err != nil {
			rem.Close()
			rem = nil
			continue
		}
		p.show(st)
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
