package faketarget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config and Faults.
const (
	// DefaultAddr is the listen address Start uses when Config.Addr is empty.
	DefaultAddr = "127.0.0.1:0"
	// DefaultRetryAfter is the Retry-After value of fault answers when
	// Faults.RetryAfter is empty.
	DefaultRetryAfter = "1"
	// DefaultSlowCommitDelay is how long a slow create takes when
	// Faults.SlowCommitDelay is zero or negative.
	DefaultSlowCommitDelay = 2 * time.Second
	// DefaultStatusHang is how long a hanging status answer waits when
	// Faults.StatusHang is zero or negative.
	DefaultStatusHang = 3 * time.Second
	// MaxBodyBytes is the largest POST body accepted (1 MiB); a larger one
	// is answered 413.
	MaxBodyBytes = 1 << 20
)

// ErrClosed is returned by the Wait methods when the server was closed
// before the condition held.
var ErrClosed = errors.New("faketarget: server closed")

// Faults sets the probability of each injected fault and the timings they
// use. A probability at or below 0 (or NaN) never fires, one at or above 1
// always fires. The zero value injects nothing.
type Faults struct {
	// LoseResponse commits the create (or serves the replay), then drops
	// the connection without any response.
	LoseResponse float64
	// Busy503 answers 503 with Retry-After before anything is committed.
	Busy503 float64
	// TooMany429 answers 429 with Retry-After before anything is committed.
	TooMany429 float64
	// CommitThen500 commits the create (or serves the replay), then answers
	// 500.
	CommitThen500 float64
	// CommitThen502 commits the create (or serves the replay), then answers
	// 502.
	CommitThen502 float64
	// CommitThen504 commits the create (or serves the replay), then answers
	// 504.
	CommitThen504 float64
	// SlowCommit makes a create take SlowCommitDelay before it commits. The
	// commit runs in a background goroutine, so it happens even when the
	// client has gone away; while it is in flight the status endpoint
	// answers "processing" and, with Dedup on, the same key gets 409.
	SlowCommit float64
	// DropBeforeHandling hijacks and closes the connection before the body
	// is read: the request never takes effect and its body and headers are
	// not recorded.
	DropBeforeHandling float64
	// FlakyStatus makes a status query either answer 503 with Retry-After or
	// hang for StatusHang and then answer truthfully, half and half.
	FlakyStatus float64

	// RetryAfter is the Retry-After value sent with 503 and 429 fault
	// answers. Defaults to "1".
	RetryAfter string
	// SlowCommitDelay is how long a slow create takes. Defaults to 2s.
	SlowCommitDelay time.Duration
	// StatusHang is how long a hanging status query waits. Defaults to 3s.
	StatusHang time.Duration
	// Latency is added before handling every request, on every endpoint.
	// Defaults to 0 (none).
	Latency time.Duration
	// RateLimit, above 0, is the most creates the target takes in any
	// one second: a POST over it is answered 429 with Retry-After before
	// anything is committed. Defaults to 0 (no limit).
	RateLimit int
	// HideInProgress makes the status endpoint answer 404 for a create
	// still in progress (see SlowCommit) instead of "processing", as a
	// status endpoint that lags the writes does (a read replica, a search
	// index, a queue in front of the writer).
	HideInProgress bool
}

func (f Faults) withDefaults() Faults {
	if f.RetryAfter == "" {
		f.RetryAfter = DefaultRetryAfter
	}
	if f.SlowCommitDelay <= 0 {
		f.SlowCommitDelay = DefaultSlowCommitDelay
	}
	if f.StatusHang <= 0 {
		f.StatusHang = DefaultStatusHang
	}
	return f
}

// Config configures a Server. The zero value is a deduplication-off target
// without faults, listening on DefaultAddr.
type Config struct {
	// Dedup makes the target deduplicate by Idempotency-Key: a request whose
	// key already has a payment gets it back when its body is byte-identical
	// to the first request's (headers are not compared) and 422 otherwise.
	// Defaults to false: every request that reaches the commit point creates
	// a payment.
	Dedup bool
	// Faults are the faults injected from the start. Defaults to none.
	Faults Faults
	// Seed seeds the fault decisions. Defaults to 0, itself a fixed seed.
	Seed uint64
	// Addr is the address Start listens on. Defaults to DefaultAddr
	// ("127.0.0.1:0", a random loopback port). New ignores it.
	Addr string
}

// Server is a running fake target. Its methods are safe for concurrent use.
type Server struct {
	dedup  atomic.Bool
	faults atomic.Pointer[Faults]
	// undecided counts create handlers that have not yet decided whether
	// they create (still in their latency pause, or reading the body): a
	// client that gave up does not stop them (Settle waits for them).
	undecided atomic.Int64

	randMu sync.Mutex
	rng    *rand.Rand

	mu       sync.Mutex
	posts    postTimes
	closed   bool
	closing  chan struct{} // closed when Close starts
	changed  chan struct{} // closed and replaced on every change of the truth
	nextID   int
	keys     map[string]*keyState
	counters Counters
	wg       sync.WaitGroup // handlers and slow commits; Add only under mu while !closed

	handler   http.Handler
	srv       *http.Server
	serveDone chan struct{}
	url       string

	closeOnce sync.Once
	closeErr  error
}

// New returns a Server that is not listening: serve its Handler, for
// example with httptest.NewServer, and call Close when done (before closing
// the httptest server, so that hanging handlers are released). URL and
// StatusTemplate return "" for such a Server. cfg.Addr is ignored.
func New(cfg Config) *Server {
	s := &Server{
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		closing: make(chan struct{}),
		changed: make(chan struct{}),
		keys:    make(map[string]*keyState),
	}
	s.dedup.Store(cfg.Dedup)
	f := cfg.Faults
	s.faults.Store(&f)
	s.handler = http.HandlerFunc(s.serve)
	return s
}

// Start returns a Server listening on cfg.Addr (default DefaultAddr) with a
// real net/http server. Call Close to stop it.
func Start(cfg Config) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faketarget: listen on %s: %w", addr, err)
	}
	s := New(cfg)
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln) // always ErrServerClosed after Close
	}()
	return s, nil
}

// URL returns the base URL, e.g. "http://127.0.0.1:41234", or "" for a
// Server made by New.
func (s *Server) URL() string { return s.url }

// StatusTemplate returns the status URL template, URL() followed by
// "/payments/by-key/{key}", or "" for a Server made by New.
func (s *Server) StatusTemplate() string {
	if s.url == "" {
		return ""
	}
	return s.url + statusPrefix + "{key}"
}

// Handler returns the http.Handler serving every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// SetFaults replaces the faults; requests that already started keep the
// faults they started with.
func (s *Server) SetFaults(f Faults) { s.faults.Store(&f) }

// SetDedup turns deduplication by key on or off for requests that reach the
// commit point from now on.
func (s *Server) SetDedup(on bool) { s.dedup.Store(on) }

// Close stops the server: it closes the listener and every connection,
// interrupts every wait, abandons every slow create that has not committed
// yet (each counted in Counters.Abandoned), and returns once every handler
// and background goroutine has returned. Requests arriving later are dropped
// without effect. Close is idempotent and returns nil unless closing the
// listener failed.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		for _, ks := range s.keys {
			for _, p := range slices.Clone(ks.pending) {
				s.resolveLocked(p, false)
			}
		}
		s.signalLocked()
		s.mu.Unlock()
		if s.srv != nil {
			if err := s.srv.Close(); err != nil {
				s.closeErr = fmt.Errorf("faketarget: close: %w", err)
			}
			<-s.serveDone
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// enter registers a handler; it reports false once Close has started.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// roll reports whether a fault of probability p fires.
func (s *Server) roll(p float64) bool {
	switch {
	case !(p > 0):
		return false
	case p >= 1:
		return true
	}
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rng.Float64() < p
}

// coin returns true or false with equal probability.
func (s *Server) coin() bool {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rng.IntN(2) == 0
}

// pause waits d; it reports false when ctx ends or Close starts first.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

// signalLocked wakes every waiter; s.mu must be held.
func (s *Server) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitFor blocks until cond, called with s.mu held, reports true.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, closed, ch := cond(), s.closed, s.changed
		s.mu.Unlock()
		switch {
		case ok:
			return nil
		case closed:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("faketarget: wait: %w", ctx.Err())
		}
	}
}
