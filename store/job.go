package store

import (
	"fmt"
	"net/http"
	"slices"
	"time"
)

// State is where a job is in its life. The values and their meaning are those
// of ARCHITECTURE.md §2.
type State string

// The seven states of a job.
const (
	// StatePending: waiting for its next attempt at NextRunAt.
	StatePending State = "pending"
	// StateRunning: an attempt is in flight; its record is durable.
	StateRunning State = "running"
	// StateUnknown: the last attempt may have taken effect; a status query
	// (or a replay inside the key TTL) is due at NextRunAt.
	StateUnknown State = "unknown"
	// StateSucceeded: the effect happened once.
	StateSucceeded State = "succeeded"
	// StateFailed: the effect did not happen.
	StateFailed State = "failed"
	// StateNeedsAttention: the effect may have happened and idemrun could
	// not find out; a person must resolve the job.
	StateNeedsAttention State = "needs_attention"
	// StateCanceled: canceled by a person before any attempt could have had
	// an effect.
	StateCanceled State = "canceled"
)

// States lists every state in display order.
func States() []State {
	return []State{StatePending, StateRunning, StateUnknown, StateSucceeded, StateFailed, StateNeedsAttention, StateCanceled}
}

// ParseState returns the state named s, or an error naming the accepted
// values.
func ParseState(s string) (State, error) {
	for _, st := range States() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("store: unknown state %q; accepted: pending, running, unknown, succeeded, failed, needs_attention, canceled", s)
}

// Terminal reports whether no further automatic transition leaves s.
// needs_attention is not terminal: a person resolves it.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// legal is the transition table of ARCHITECTURE.md §2. A transition not in
// it is refused inside the transaction that tries it.
var legal = map[State]map[State]bool{
	StatePending:        {StateRunning: true, StateCanceled: true, StateFailed: true, StateNeedsAttention: true},
	StateRunning:        {StateSucceeded: true, StateFailed: true, StatePending: true, StateUnknown: true, StateNeedsAttention: true},
	StateUnknown:        {StateUnknown: true, StateSucceeded: true, StateFailed: true, StatePending: true, StateNeedsAttention: true},
	StateNeedsAttention: {StateSucceeded: true, StateFailed: true},
	StateFailed:         {StatePending: true},
	StateSucceeded:      {},
	StateCanceled:       {},
}

// Legal reports whether the transition table (ARCHITECTURE.md §2) allows a job to move from one state
// to another.
func Legal(from, to State) bool { return legal[from][to] }

// HeaderField is one request header line, kept in the order given so every
// attempt sends byte-identical headers.
type HeaderField struct {
	Name  string `json:"n"`
	Value string `json:"v"`
}

// Request is the HTTP request a job sends, exactly as stored.
type Request struct {
	Method string        `json:"method"`
	URL    string        `json:"url"`
	Header []HeaderField `json:"header,omitempty"`
	Body   []byte        `json:"body,omitempty"`
}

// HTTPHeader returns the request's headers as an http.Header, values in
// their stored order.
func (r *Request) HTTPHeader() http.Header {
	h := make(http.Header, len(r.Header))
	for _, f := range r.Header {
		h.Add(f.Name, f.Value)
	}
	return h
}

// Result is the answer that ended a job: the 2xx response of an attempt or
// the body a status query found.
type Result struct {
	HTTPStatus int    `json:"http_status,omitempty"`
	Body       []byte `json:"body,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	Source     string `json:"source,omitempty"` // "attempt" or "status_query"
}

// EventKind says what an Event records.
type EventKind string

// Kinds of history events.
const (
	EventAttempt     EventKind = "attempt"
	EventStatusQuery EventKind = "status_query"
	EventManual      EventKind = "manual"
	EventRecovery    EventKind = "recovery"
	EventSchedule    EventKind = "schedule"
)

// Event is one entry of a job's history: an attempt, a status query, a
// manual action or a recovery after a crash.
type Event struct {
	Kind        EventKind     `json:"kind"`                          // attempt, status_query, manual, recovery or schedule
	N           int           `json:"n,omitempty"`                   // attempt or query number
	Start       time.Time     `json:"start"`                         // when it began
	End         time.Time     `json:"end,omitzero"`                  // when it ended; zero while an attempt is in flight
	Class       string        `json:"class,omitempty"`               // an attempt's class: succeeded, no_effect, unknown, permanent, …
	HTTPStatus  int           `json:"http_status,omitempty"`         // the status answered
	Error       string        `json:"error,omitempty"`               // what went wrong, redacted in every view
	RetryAfter  string        `json:"retry_after,omitempty"`         // the answer's Retry-After, as sent
	Replayed    string        `json:"idempotent_replayed,omitempty"` // the answer's Idempotent-Replayed header, as sent
	Truncated   bool          `json:"truncated,omitempty"`           // the answer's body was cut at the body cap
	Delay       time.Duration `json:"delay,omitempty"`               // the wait scheduled after it, in nanoseconds
	DelayReason string        `json:"delay_reason,omitempty"`        // why that wait: backoff, Retry-After, …
	Outcome     string        `json:"outcome,omitempty"`             // a status query's outcome: found_succeeded, not_found, no_answer, …
	Detail      string        `json:"detail,omitempty"`              // what the outcome rests on, redacted in every view
	Actor       string        `json:"actor,omitempty"`               // who made a manual action
	Note        string        `json:"note,omitempty"`                // the note of a manual action
	From        State         `json:"from,omitempty"`                // the state a manual action or recovery left
	To          State         `json:"to,omitempty"`                  // the state it moved the job to
}

// MaxHistory bounds the events kept per job. When a job has more, the oldest
// events after the first ten are dropped and counted in HistoryDropped.
const MaxHistory = 200

// Job is one stored request and everything known about it.
//
// The JSON tags name the fields for humans (history events in `idemrun show
// --json`); a stored record is the binary encoding of
// store/internal/jobbinary, and a change to a field's meaning needs a new
// format there.
type Job struct {
	ID          string  `json:"id"`
	Key         string  `json:"key"`
	Fingerprint string  `json:"fingerprint"`
	State       State   `json:"state"`
	Request     Request `json:"request"`

	// Limits and rules, fixed at enqueue.
	StatusURL        string        `json:"status_url,omitempty"`
	KeyTTL           time.Duration `json:"key_ttl,omitempty"`
	MaxAttempts      int           `json:"max_attempts"`
	DeadlineAfter    time.Duration `json:"deadline_after"`
	AttemptTimeout   time.Duration `json:"attempt_timeout"`
	ReplaySafe       bool          `json:"replay_safe,omitempty"`
	NoEffectStatuses []int         `json:"no_effect_statuses,omitempty"`
	KeyFormat        string        `json:"key_format,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	NextRunAt time.Time `json:"next_run_at"`
	// Deadline is when automatic work on the job stops: CreatedAt +
	// DeadlineAfter, reset by a manual retry.
	Deadline time.Time `json:"deadline"`

	// Attempts counts attempts started over the job's life; it is also the
	// fencing number of the attempt in flight.
	Attempts int `json:"attempts"`
	// AttemptBase is Attempts at the last manual retry; the attempt budget
	// counts from it.
	AttemptBase int `json:"attempt_base,omitempty"`
	// RetryBase is Attempts at the last manual retry; backoff grows with
	// the attempts after it (409 answers included, though they do not use
	// up the budget).
	RetryBase int `json:"retry_base,omitempty"`
	// StatusQueries counts status queries started over the job's life.
	StatusQueries int `json:"status_queries,omitempty"`
	// StatusBase is StatusQueries when the current unknown episode began;
	// the status budget counts from it.
	StatusBase int `json:"status_base,omitempty"`
	// FirstSentAt is when the first attempt was claimed (key TTL windows
	// count from it).
	FirstSentAt time.Time `json:"first_sent_at,omitzero"`
	// UnknownSince is when the current unknown episode began.
	UnknownSince time.Time `json:"unknown_since,omitzero"`
	// MayHaveEffect is true while an attempt's outcome is unknown and no
	// status answer has settled it. A job with it set is never canceled and
	// never ends failed by exhaustion.
	MayHaveEffect bool `json:"may_have_effect,omitempty"`
	// Fence increases on every claim; a write that carries an older fence is
	// refused (ErrFenced), so a stale worker cannot overwrite a newer one.
	Fence uint64 `json:"fence"`
	// Owner is the runner instance that made the last claim
	// (Claim.Owner). While the job is running, that runner's lease says
	// whether its attempt is still being worked.
	Owner string `json:"owner,omitempty"`

	LastError  string `json:"last_error,omitempty"`
	LastStatus int    `json:"last_status,omitempty"`
	LastClass  string `json:"last_class,omitempty"`
	// Reason says why the job is failed or needs attention, in words a
	// person can act on.
	Reason string  `json:"reason,omitempty"`
	Result *Result `json:"result,omitempty"`

	History        []Event `json:"history,omitempty"`
	HistoryDropped int     `json:"history_dropped,omitempty"`
}

// AttemptsLeft returns how many attempts the job's budget still allows.
func (j *Job) AttemptsLeft() int {
	n := j.MaxAttempts - (j.Attempts - j.AttemptBase)
	if n < 0 {
		return 0
	}
	return n
}

// AddEvent appends e to the history, keeping it within MaxHistory.
func (j *Job) AddEvent(e Event) {
	j.History = append(j.History, e)
	over := len(j.History) - MaxHistory
	if over <= 0 {
		return
	}
	// The first events stay (how the job began), and so do the latest.
	// Between them, attempts and status queries go first, then recovery
	// events, and a person's actions (cancel, retry, resolve, who and why)
	// only when nothing else is left to drop.
	const keep = 10
	for _, droppable := range [][]EventKind{{EventAttempt, EventStatusQuery}, {EventRecovery}, nil} {
		if over == 0 {
			break
		}
		kept := j.History[:keep]
		for i := keep; i < len(j.History); i++ {
			ev := j.History[i]
			last := i == len(j.History)-1
			if over > 0 && !last && (droppable == nil || slices.Contains(droppable, ev.Kind)) {
				over--
				j.HistoryDropped++
				continue
			}
			kept = append(kept, ev)
		}
		j.History = kept
	}
}

// LastEvent returns the last event of kind k, or nil.
func (j *Job) LastEvent(k EventKind) *Event {
	for i := len(j.History) - 1; i >= 0; i-- {
		if j.History[i].Kind == k {
			return &j.History[i]
		}
	}
	return nil
}

// Clone returns a deep copy of j, so callers never share slices with a
// record being written.
func (j *Job) Clone() *Job {
	c := *j
	c.Request.Header = append([]HeaderField(nil), j.Request.Header...)
	c.Request.Body = append([]byte(nil), j.Request.Body...)
	c.NoEffectStatuses = append([]int(nil), j.NoEffectStatuses...)
	c.History = append([]Event(nil), j.History...)
	if j.Result != nil {
		r := *j.Result
		r.Body = append([]byte(nil), j.Result.Body...)
		c.Result = &r
	}
	return &c
}
