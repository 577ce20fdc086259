package faketarget

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemrun/idemrun/idemkey"
)

const (
	paymentsPath = "/payments"
	statusPrefix = "/payments/by-key/"
	statsPath    = "/stats"
)

// afterCommit is the fault, if any, applied once a create committed or a
// replay was decided.
type afterCommit int

const (
	afterNone afterCommit = iota
	afterLose
	after500
	after502
	after504
)

// serve dispatches on the escaped path itself rather than through
// http.ServeMux, so that keys such as "..", "a//b" or "a%2Fb" reach the
// status handler unchanged instead of being cleaned and redirected.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		panic(http.ErrAbortHandler)
	}
	defer s.wg.Done()
	f := s.faults.Load().withDefaults()
	path := r.URL.EscapedPath()
	switch {
	case path == paymentsPath:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.create(w, r, f)
	case strings.HasPrefix(path, statusPrefix):
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		s.status(w, r, f, strings.TrimPrefix(path, statusPrefix))
	case path == statsPath:
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		if !s.pause(r.Context(), f.Latency) {
			panic(http.ErrAbortHandler)
		}
		writeJSON(w, http.StatusOK, s.Stats())
	default:
		writeError(w, http.StatusNotFound, "not found")
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, f Faults) {
	s.undecided.Add(1)
	decided := false
	defer func() {
		if !decided {
			s.decidedOne()
		}
	}()
	s.arrived()
	if !s.pause(r.Context(), f.Latency) {
		panic(http.ErrAbortHandler)
	}
	if s.roll(f.DropBeforeHandling) {
		s.count(func(c *Counters) { c.Faults.DropBeforeHandling++ })
		drop(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			s.count(func(c *Counters) { c.TooLarge413++ })
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		panic(http.ErrAbortHandler) // the client went away mid-body
	}
	key, msg := keyFromHeader(r.Header)
	if msg != "" {
		s.count(func(c *Counters) { c.BadRequest400++ })
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	s.record(key, body, r.Header.Clone())

	if f.RateLimit > 0 && !s.underLimit(f.RateLimit) {
		s.count(func(c *Counters) { c.Faults.RateLimited429++ })
		w.Header().Set("Retry-After", f.RetryAfter)
		writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
		return
	}
	if s.roll(f.Busy503) {
		s.count(func(c *Counters) { c.Faults.Busy503++ })
		w.Header().Set("Retry-After", f.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, "busy, retry later")
		return
	}
	if s.roll(f.TooMany429) {
		s.count(func(c *Counters) { c.Faults.TooMany429++ })
		w.Header().Set("Retry-After", f.RetryAfter)
		writeError(w, http.StatusTooManyRequests, "too many requests")
		return
	}
	slow := s.roll(f.SlowCommit)
	after := s.rollAfterCommit(f)

	d := s.decide(key, body, slow, f.SlowCommitDelay)
	decided = true
	s.decidedOne()
	switch d.kind {
	case decidedClosed:
		panic(http.ErrAbortHandler)
	case decidedMismatch:
		writeError(w, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different body")
		return
	case decidedInProgress:
		writeError(w, http.StatusConflict, "a request with this Idempotency-Key is still being processed")
		return
	case decidedSlow:
		select {
		case <-d.pending.done:
		case <-r.Context().Done():
			return // the client left; the commit goes on in the background
		case <-s.closing:
			panic(http.ErrAbortHandler)
		}
		if d.pending.abandoned {
			panic(http.ErrAbortHandler)
		}
		d.payment = d.pending.payment
	}
	s.answer(w, after, d.payment, d.kind == decidedReplay)
}

// rollAfterCommit picks the fault applied after the commit point.
func (s *Server) rollAfterCommit(f Faults) afterCommit {
	switch {
	case s.roll(f.LoseResponse):
		return afterLose
	case s.roll(f.CommitThen500):
		return after500
	case s.roll(f.CommitThen502):
		return after502
	case s.roll(f.CommitThen504):
		return after504
	}
	return afterNone
}

// answer writes the outcome of a committed create or a replay.
func (s *Server) answer(w http.ResponseWriter, after afterCommit, p Payment, replayed bool) {
	switch after {
	case afterLose:
		s.count(func(c *Counters) { c.Faults.LoseResponse++ })
		panic(http.ErrAbortHandler)
	case after500:
		s.count(func(c *Counters) { c.Faults.CommitThen500++ })
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	case after502:
		s.count(func(c *Counters) { c.Faults.CommitThen502++ })
		writeError(w, http.StatusBadGateway, "bad gateway")
		return
	case after504:
		s.count(func(c *Counters) { c.Faults.CommitThen504++ })
		writeError(w, http.StatusGatewayTimeout, "gateway timeout")
		return
	}
	s.count(func(c *Counters) { c.Answered2xx++ })
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, p)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, f Faults, escapedKey string) {
	s.count(func(c *Counters) { c.StatusQueries++ })
	if !s.pause(r.Context(), f.Latency) {
		panic(http.ErrAbortHandler)
	}
	key, err := url.PathUnescape(escapedKey)
	if err != nil || key == "" {
		writeError(w, http.StatusBadRequest, "invalid key in path")
		return
	}
	if s.roll(f.FlakyStatus) {
		if s.coin() {
			s.count(func(c *Counters) { c.Faults.FlakyStatus503++ })
			w.Header().Set("Retry-After", f.RetryAfter)
			writeError(w, http.StatusServiceUnavailable, "status temporarily unavailable")
			return
		}
		s.count(func(c *Counters) { c.Faults.FlakyStatusHang++ })
		if !s.pause(r.Context(), f.StatusHang) {
			panic(http.ErrAbortHandler)
		}
	}

	s.mu.Lock()
	var ps []Payment
	inFlight := 0
	if ks := s.keys[key]; ks != nil {
		ps = copyPayments(ks.payments)
		inFlight = len(ks.pending)
	}
	switch {
	case len(ps) > 1:
		s.counters.StatusDuplicate++
	case len(ps) == 1:
		s.counters.StatusFound++
	case inFlight > 0 && !f.HideInProgress:
		s.counters.StatusProcessing++
	default:
		s.counters.StatusNotFound++
	}
	s.signalLocked()
	s.mu.Unlock()

	switch {
	case len(ps) > 1:
		writeJSON(w, http.StatusOK, struct {
			Data []Payment `json:"data"`
		}{ps})
	case len(ps) == 1:
		writeJSON(w, http.StatusOK, ps[0])
	case inFlight > 0 && !f.HideInProgress:
		writeJSON(w, http.StatusOK, map[string]string{"status": "processing", "key": key})
	default:
		writeError(w, http.StatusNotFound, "not found")
	}
}

type decisionKind int

const (
	decidedCreated decisionKind = iota
	decidedReplay
	decidedInProgress
	decidedMismatch
	decidedSlow
	decidedClosed
)

type decision struct {
	kind    decisionKind
	payment Payment  // decidedCreated, decidedReplay
	pending *pending // decidedSlow
}

// decide is the commit point: deduplication and the commit (or the start of
// a slow commit) happen under one lock, so concurrent requests for one key
// cannot both create when Dedup is on.
func (s *Server) decide(key string, body []byte, slow bool, delay time.Duration) decision {
	hash := sha256.Sum256(body)
	amount := amountOf(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return decision{kind: decidedClosed}
	}
	ks := s.keyStateLocked(key)
	if s.dedup.Load() {
		switch {
		case len(ks.payments) > 0:
			if ks.hashes[0] != hash {
				s.counters.Mismatch422++
				return decision{kind: decidedMismatch}
			}
			s.counters.Replayed++
			return decision{kind: decidedReplay, payment: copyPayment(ks.payments[0])}
		case len(ks.pending) > 0:
			if ks.pending[0].hash != hash {
				s.counters.Mismatch422++
				return decision{kind: decidedMismatch}
			}
			s.counters.InProgress409++
			return decision{kind: decidedInProgress}
		}
	}
	if !slow {
		return decision{kind: decidedCreated, payment: copyPayment(s.commitLocked(ks, key, hash, amount))}
	}
	s.counters.Faults.SlowCommit++
	p := &pending{key: key, hash: hash, amount: amount, done: make(chan struct{})}
	ks.pending = append(ks.pending, p)
	s.signalLocked()
	s.wg.Add(1)
	go s.slowCommit(p, delay)
	return decision{kind: decidedSlow, pending: p}
}

// slowCommit commits p after delay unless Close or CommitInFlight resolved
// it first. It runs detached from the request, so the commit happens even
// when the client has gone away.
func (s *Server) slowCommit(p *pending, delay time.Duration) {
	defer s.wg.Done()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.done:
	case <-s.closing:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolveLocked(p, !s.closed)
}

// resolveLocked commits or abandons p once; s.mu must be held.
func (s *Server) resolveLocked(p *pending, commit bool) {
	if p.resolved {
		return
	}
	p.resolved = true
	ks := s.keys[p.key]
	for i, q := range ks.pending {
		if q == p {
			ks.pending = append(ks.pending[:i], ks.pending[i+1:]...)
			break
		}
	}
	if commit {
		p.payment = copyPayment(s.commitLocked(ks, p.key, p.hash, p.amount))
	} else {
		p.abandoned = true
		s.counters.Abandoned++
	}
	s.signalLocked()
	close(p.done)
}

// commitLocked creates a payment; s.mu must be held.
func (s *Server) commitLocked(ks *keyState, key string, hash [sha256.Size]byte, amount json.RawMessage) Payment {
	s.nextID++
	p := Payment{ID: "pay_" + strconv.Itoa(s.nextID), Key: key, Status: "succeeded", Amount: amount}
	ks.payments = append(ks.payments, p)
	ks.hashes = append(ks.hashes, hash)
	s.counters.Created++
	s.signalLocked()
	return p
}

// keyFromHeader returns the idempotency key, or the error message to answer
// 400 with.
func keyFromHeader(h http.Header) (key, msg string) {
	vs := h.Values(idemkey.HeaderName)
	switch {
	case len(vs) == 0 || (len(vs) == 1 && strings.Trim(vs[0], " \t") == ""):
		return "", "missing Idempotency-Key"
	case len(vs) > 1:
		return "", "invalid Idempotency-Key: sent more than once"
	}
	key, err := idemkey.ParseHeader(vs[0])
	if err != nil {
		return "", "invalid Idempotency-Key"
	}
	return key, ""
}

// amountOf returns the compacted "amount" of a JSON object body, or nil.
func amountOf(body []byte) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	raw, ok := obj["amount"]
	if !ok {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}

// drop closes the connection without answering.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2 or a recorder: abort instead
	}
	_ = conn.Close()
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed")
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
