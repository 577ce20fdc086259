package faketarget

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// Payment is a payment the target created.
type Payment struct {
	// ID is "pay_<n>", n counting creates from 1 across all keys.
	ID string `json:"id"`
	// Key is the idempotency key of the request that created it.
	Key string `json:"key"`
	// Status is always "succeeded".
	Status string `json:"status"`
	// Amount echoes the "amount" field of a JSON object body, compacted; it
	// is empty (and omitted from JSON) when the body had none.
	Amount json.RawMessage `json:"amount,omitempty"`
}

// FaultCounts counts the faults actually injected, per kind. A fault that was
// decided but could not apply (the client left during a slow commit) is not
// counted.
type FaultCounts struct {
	// LoseResponse counts answers dropped after the commit point.
	LoseResponse int `json:"lose_response"`
	// Busy503 counts 503 answers given before the commit point.
	Busy503 int `json:"busy_503"`
	// TooMany429 counts 429 answers given before the commit point.
	TooMany429 int `json:"too_many_429"`
	// CommitThen500 counts 500 answers given after the commit point.
	CommitThen500 int `json:"commit_then_500"`
	// CommitThen502 counts 502 answers given after the commit point.
	CommitThen502 int `json:"commit_then_502"`
	// CommitThen504 counts 504 answers given after the commit point.
	CommitThen504 int `json:"commit_then_504"`
	// SlowCommit counts slow creates started.
	SlowCommit int `json:"slow_commit"`
	// DropBeforeHandling counts connections dropped before the body was
	// read.
	DropBeforeHandling int `json:"drop_before_handling"`
	// RateLimited429 counts POSTs answered 429 for being over RateLimit.
	RateLimited429 int `json:"rate_limited_429"`
	// FlakyStatus503 counts status queries answered 503 by the FlakyStatus
	// fault.
	FlakyStatus503 int `json:"flaky_status_503"`
	// FlakyStatusHang counts status queries made to hang by the FlakyStatus
	// fault.
	FlakyStatusHang int `json:"flaky_status_hang"`
}

// Counters counts what the target received and did.
type Counters struct {
	// Posts counts POST /payments requests received, dropped ones included.
	Posts int `json:"posts"`
	// Created counts payments committed; it equals TotalCreates.
	Created int `json:"created"`
	// Replayed counts replays decided with Dedup on, including those whose
	// answer a fault then replaced or dropped.
	Replayed int `json:"replayed"`
	// Answered2xx counts POSTs answered 201, new creates and replays.
	Answered2xx int `json:"answered_2xx"`
	// InProgress409 counts POSTs answered 409 (same key while in flight).
	InProgress409 int `json:"in_progress_409"`
	// Mismatch422 counts POSTs answered 422 (same key, different body).
	Mismatch422 int `json:"mismatch_422"`
	// BadRequest400 counts POSTs answered 400 (missing or invalid key).
	BadRequest400 int `json:"bad_request_400"`
	// TooLarge413 counts POSTs answered 413 (body over MaxBodyBytes).
	TooLarge413 int `json:"too_large_413"`
	// Abandoned counts slow creates that Close abandoned before they
	// committed.
	Abandoned int `json:"abandoned"`
	// StatusQueries counts GET /payments/by-key/{key} requests received.
	StatusQueries int `json:"status_queries"`
	// StatusFound counts status answers with exactly one payment.
	StatusFound int `json:"status_found"`
	// StatusDuplicate counts status answers listing several payments.
	StatusDuplicate int `json:"status_duplicate"`
	// StatusProcessing counts "processing" status answers.
	StatusProcessing int `json:"status_processing"`
	// StatusNotFound counts 404 status answers.
	StatusNotFound int `json:"status_not_found"`
	// Faults counts the injected faults per kind.
	Faults FaultCounts `json:"faults"`
}

// Stats is what GET /stats answers.
type Stats struct {
	// Counters are the request counters.
	Counters Counters `json:"counters"`
	// TotalCreates is the number of payments created.
	TotalCreates int `json:"total_creates"`
	// Duplicates lists the keys with more than one payment, sorted.
	Duplicates []string `json:"duplicates"`
}

type keyState struct {
	payments []Payment
	hashes   [][sha256.Size]byte // body hash of each payment's request
	pending  []*pending
	bodies   [][]byte
	headers  []http.Header
}

// pending is a slow create in flight. Its fields after done are written
// once under Server.mu before done is closed.
type pending struct {
	key       string
	hash      [sha256.Size]byte
	amount    json.RawMessage
	done      chan struct{}
	resolved  bool
	abandoned bool
	payment   Payment
}

func (s *Server) keyStateLocked(key string) *keyState {
	ks := s.keys[key]
	if ks == nil {
		ks = &keyState{}
		s.keys[key] = ks
	}
	return ks
}

func (s *Server) count(f func(*Counters)) {
	s.mu.Lock()
	f(&s.counters)
	s.signalLocked()
	s.mu.Unlock()
}

func (s *Server) record(key string, body []byte, h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keyStateLocked(key)
	ks.bodies = append(ks.bodies, body)
	ks.headers = append(ks.headers, h)
	s.signalLocked()
}

// CreatesByKey returns the number of payments created per key, for every key
// with at least one.
func (s *Server) CreatesByKey() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int)
	for k, ks := range s.keys {
		if n := len(ks.payments); n > 0 {
			m[k] = n
		}
	}
	return m
}

// Creates returns the number of payments created for key.
func (s *Server) Creates(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.keys[key]; ks != nil {
		return len(ks.payments)
	}
	return 0
}

// TotalCreates returns the number of payments created for all keys.
func (s *Server) TotalCreates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters.Created
}

// Duplicates returns the keys with more than one payment, sorted; it is
// empty (nil) when there are none.
func (s *Server) Duplicates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicatesLocked()
}

func (s *Server) duplicatesLocked() []string {
	var d []string
	for k, ks := range s.keys {
		if len(ks.payments) > 1 {
			d = append(d, k)
		}
	}
	slices.Sort(d)
	return d
}

// InFlight returns the number of slow creates for key that have not
// committed yet.
func (s *Server) InFlight(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.keys[key]; ks != nil {
		return len(ks.pending)
	}
	return 0
}

// Requests returns a copy of the counters.
func (s *Server) Requests() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters
}

// Stats returns the counters, the total creates and the duplicate keys.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.duplicatesLocked()
	if d == nil {
		d = []string{}
	}
	return Stats{Counters: s.counters, TotalCreates: s.counters.Created, Duplicates: d}
}

// Payments returns a copy of the payments created for key, oldest first.
func (s *Server) Payments(key string) []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.keys[key]; ks != nil {
		return copyPayments(ks.payments)
	}
	return nil
}

// BodiesByKey returns a copy of the body of every POST received for key with
// a valid key and a body within MaxBodyBytes, in arrival order, whether or
// not it took effect. Dropped requests (DropBeforeHandling) are not included.
func (s *Server) BodiesByKey(key string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil {
		return nil
	}
	out := make([][]byte, len(ks.bodies))
	for i, b := range ks.bodies {
		out[i] = bytes.Clone(b)
	}
	return out
}

// HeadersByKey returns a copy of the headers of the same requests that
// BodiesByKey returns, in the same order, as net/http hands them to a
// handler (it moves Host and Content-Length out of the header map).
func (s *Server) HeadersByKey(key string) []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil {
		return nil
	}
	out := make([]http.Header, len(ks.headers))
	for i, h := range ks.headers {
		out[i] = h.Clone()
	}
	return out
}

// CommitInFlight commits every slow create in flight now, without waiting
// for its delay, and returns how many it committed. Their handlers answer as
// if the delay had passed. It lets a test check the "processing" state with
// a long SlowCommitDelay and then end it without sleeping.
func (s *Server) CommitInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	n := 0
	for _, ks := range s.keys {
		for _, p := range slices.Clone(ks.pending) {
			s.resolveLocked(p, true)
			n++
		}
	}
	return n
}

// Settle waits, up to limit, until no create handler is still before its
// decision (a POST whose client gave up during the latency pause goes on
// and may still create), then commits the slow creates in flight
// (CommitInFlight). After it, the truth holds every create the requests
// received so far will make. It reports whether the handlers settled in
// time.
func (s *Server) Settle(limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_ = s.waitFor(ctx, func() bool { return s.undecided.Load() == 0 })
	s.CommitInFlight()
	return s.undecided.Load() == 0
}

// decidedOne counts a create handler out of undecided, and wakes Settle
// when it was the last.
func (s *Server) decidedOne() {
	if s.undecided.Add(-1) == 0 {
		s.mu.Lock()
		s.signalLocked()
		s.mu.Unlock()
	}
}

// WaitCreates blocks until at least n payments exist for key, ctx ends or
// the server is closed (ErrClosed).
func (s *Server) WaitCreates(ctx context.Context, key string, n int) error {
	return s.waitFor(ctx, func() bool {
		ks := s.keys[key]
		return ks != nil && len(ks.payments) >= n
	})
}

// WaitTotalCreates blocks until at least n payments exist in all, ctx ends
// or the server is closed (ErrClosed).
func (s *Server) WaitTotalCreates(ctx context.Context, n int) error {
	return s.waitFor(ctx, func() bool { return s.counters.Created >= n })
}

// WaitInFlight blocks until at least n slow creates for key are in flight,
// ctx ends or the server is closed (ErrClosed).
func (s *Server) WaitInFlight(ctx context.Context, key string, n int) error {
	return s.waitFor(ctx, func() bool {
		ks := s.keys[key]
		return ks != nil && len(ks.pending) >= n
	})
}

func copyPayment(p Payment) Payment {
	p.Amount = bytes.Clone(p.Amount)
	return p
}

func copyPayments(ps []Payment) []Payment {
	if ps == nil {
		return nil
	}
	out := make([]Payment, len(ps))
	for i, p := range ps {
		out[i] = copyPayment(p)
	}
	return out
}
