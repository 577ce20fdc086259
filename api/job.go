package api

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/store"
)

// Job is the view of a job that the Go API, the CLI and the admin API show.
// Secrets are redacted; the request body is not included (only its size).
// JSON field names are a contract: scripts depend on them.
type Job struct {
	ID         string    `json:"id"`          // the job's id, a UUIDv7
	Key        string    `json:"key"`         // the idempotency key every attempt sends
	State      State     `json:"state"`       // pending, running, unknown, succeeded, failed, needs_attention or canceled
	Method     string    `json:"method"`      // the request's method
	URL        string    `json:"url"`         // the request's URL, sensitive parameters redacted
	Attempts   int       `json:"attempts"`    // attempts started, every one counted (see AttemptsLeft)
	CreatedAt  time.Time `json:"created_at"`  // when it was enqueued
	UpdatedAt  time.Time `json:"updated_at"`  // its last change
	NextRunAt  time.Time `json:"next_run_at"` // when its next attempt or status query is due
	LastError  string    `json:"last_error"`  // the last attempt's or query's error text, redacted
	LastStatus int       `json:"last_status"` // the last HTTP status received, 0 for none

	// Existing is true when an enqueue found this request already
	// stored under its key.
	Existing bool `json:"existing,omitempty"`

	// Owner is the runner instance working a running job (the owner of
	// its claim); empty for the other states.
	Owner string `json:"owner,omitempty"`
	// Lease says, for a running job, whether its owner still holds its
	// lease: LeaseAlive, or LeaseExpired when that runner is gone (killed,
	// or cut off from the store) and the attempt it started becomes an
	// unknown outcome when a runner next rescues it. Empty for the other
	// states, and when the leases could not be read.
	Lease string `json:"lease,omitempty"`

	MaxAttempts int `json:"max_attempts"` // the attempt limit
	// AttemptsLeft is what the attempt limit still allows. Attempts counts
	// every attempt started, some of which the limit does not count: sends
	// answered 409 (in progress) and attempts before a manual retry. So
	// Attempts may exceed MaxAttempts; MaxAttempts - AttemptsLeft is what
	// the limit has counted.
	AttemptsLeft   int           `json:"attempts_left"`
	Deadline       time.Time     `json:"deadline"`                  // when automatic work on it stops
	AttemptTimeout Duration      `json:"attempt_timeout"`           // the timeout of one attempt
	KeyTTL         Duration      `json:"key_ttl,omitempty"`         // how long the target deduplicates by key, when declared
	StatusURL      string        `json:"status_url,omitempty"`      // the status URL template, redacted
	StatusQueries  int           `json:"status_queries"`            // status queries sent
	LastClass      string        `json:"last_class,omitempty"`      // the last attempt's class: succeeded, no_effect, unknown, permanent, …
	Reason         string        `json:"reason,omitempty"`          // why it failed or needs a person, redacted
	MayHaveEffect  bool          `json:"may_have_effect"`           // an attempt may have reached the target (cancel is refused)
	Fingerprint    string        `json:"fingerprint,omitempty"`     // the hash of the request the key is bound to (show only)
	Headers        []WireHeader  `json:"headers,omitempty"`         // the request's headers, sensitive values redacted (show only)
	BodySize       int           `json:"body_size"`                 // the request body's size in bytes; the body is never shown
	SettledBy      string        `json:"settled_by,omitempty"`      // what gave the answer that ended it: attempt or status_query
	Result         *Result       `json:"result,omitempty"`          // the answer that ended it (show only)
	History        []store.Event `json:"history,omitempty"`         // attempts, status queries and manual actions, oldest first (show only)
	HistoryDropped int           `json:"history_dropped,omitempty"` // the oldest events dropped to bound the history
}

// Values of Job.Lease.
const (
	LeaseAlive   = "alive"
	LeaseExpired = "expired"
)

// RunnerGone reports whether the job is running under a runner whose
// lease has expired.
func (j *Job) RunnerGone() bool { return j.State == store.StateRunning && j.Lease == LeaseExpired }

// setLease fills the owner and lease of a running job from leases, the
// store's leases at one moment.
func (c *Client) setLease(v *Job, j *store.Job, leases []store.Lease, err error) {
	if j.State != store.StateRunning {
		return
	}
	v.Owner = j.Owner
	if err != nil {
		return
	}
	v.Lease = LeaseExpired
	if l, ok := store.LeaseOf(leases, j.Owner); ok && l.Alive(c.opts.Now()) {
		v.Lease = LeaseAlive
	}
}

// Result is the answer that ended a job.
type Result struct {
	HTTPStatus int    `json:"http_status,omitempty"` // the answer's status
	Body       string `json:"body,omitempty"`        // the answer's body as text, redacted, when it is UTF-8
	BodyBase64 []byte `json:"body_base64,omitempty"` // the body in base64 when it is not UTF-8
	Truncated  bool   `json:"truncated,omitempty"`   // the body was cut at the body cap (64 KiB)
	Source     string `json:"source,omitempty"`      // what ended the job: attempt or status_query
}

// Duration is a time.Duration that encodes as a string ("10s") in JSON.
type Duration time.Duration

// MarshalText writes the duration as Go formats it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// summary is the view used in lists: no history, no result.
func (c *Client) summary(j *store.Job) *Job {
	return c.summaryWith(j, c.scrubber(j))
}

// UnmarshalJSON reads a job object. One from a runner older than the
// attempts_left field has none; its value is then max_attempts - attempts
// (at least 0), what such a runner's show printed, rather than 0, which
// would read as the whole budget used. (It understates what is left after
// 409 answers or a manual retry, which such a runner did not report.)
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job // no methods: no recursion
	aux := struct {
		*plain
		AttemptsLeft *int `json:"attempts_left"`
	}{plain: (*plain)(j)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	if aux.AttemptsLeft != nil {
		j.AttemptsLeft = *aux.AttemptsLeft
	} else {
		j.AttemptsLeft = max(0, j.MaxAttempts-j.Attempts)
	}
	return nil
}

func (c *Client) summaryWith(j *store.Job, scrub func(string) string) *Job {
	v := &Job{
		ID:             j.ID,
		Key:            j.Key,
		State:          j.State,
		Method:         j.Request.Method,
		URL:            c.red.URL(j.Request.URL),
		Attempts:       j.Attempts,
		CreatedAt:      j.CreatedAt,
		UpdatedAt:      j.UpdatedAt,
		NextRunAt:      j.NextRunAt,
		LastError:      scrub(j.LastError),
		LastStatus:     j.LastStatus,
		MaxAttempts:    j.MaxAttempts,
		AttemptsLeft:   j.AttemptsLeft(),
		Deadline:       j.Deadline,
		AttemptTimeout: Duration(j.AttemptTimeout),
		KeyTTL:         Duration(j.KeyTTL),
		StatusURL:      c.red.URL(j.StatusURL),
		StatusQueries:  j.StatusQueries,
		LastClass:      j.LastClass,
		Reason:         scrub(j.Reason),
		MayHaveEffect:  j.MayHaveEffect,
		BodySize:       len(j.Request.Body),
	}
	if j.Result != nil {
		v.SettledBy = j.Result.Source
	}
	return v
}

// view is the full view: headers (redacted), result and history.
func (c *Client) view(j *store.Job) *Job {
	scrub := c.scrubber(j)
	v := c.summaryWith(j, scrub)
	if j.State == store.StateRunning {
		leases, err := c.st.Leases()
		c.setLease(v, j, leases, err)
	}
	v.Fingerprint = j.Fingerprint
	for _, h := range j.Request.Header {
		v.Headers = append(v.Headers, WireHeader{Name: h.Name, Value: c.red.HeaderValue(h.Name, h.Value)})
	}
	if r := j.Result; r != nil {
		vr := &Result{HTTPStatus: r.HTTPStatus, Truncated: r.Truncated, Source: r.Source}
		// Scrubbed before the encoding is chosen: a body that is not
		// UTF-8 (a Latin-1 page, one cut mid-character at the body limit)
		// can echo a secret too.
		if body := scrub(string(r.Body)); utf8.ValidString(body) {
			vr.Body = body
		} else {
			vr.BodyBase64 = []byte(body)
		}
		v.Result = vr
	}
	v.History = make([]store.Event, len(j.History))
	for i, e := range j.History {
		e.Error = scrub(e.Error)
		e.Detail = scrub(e.Detail)
		e.Note = scrub(e.Note)
		v.History[i] = e
	}
	v.HistoryDropped = j.HistoryDropped
	return v
}

// scrubber returns a function that removes the job's own secrets
// (sensitive header values, credential URL parameters) from a text that
// might echo them. The secrets are collected once, on first need.
func (c *Client) scrubber(j *store.Job) func(string) string {
	var secrets []string
	collected := false
	return func(s string) string {
		if s == "" {
			return s
		}
		if !collected {
			// The status URL template can carry a credential too
			// (?api_key=…), and its expansion is what status-query errors
			// and echoing answers quote.
			secrets, collected = c.red.Secrets(j.Request.HTTPHeader(), j.Request.URL, j.StatusURL), true
		}
		return c.red.String(s, secrets...)
	}
}

// Scrub is runner.Config.Redact for this client's redaction rules.
func (c *Client) Scrub(j *store.Job, s string) string { return c.scrubber(j)(s) }
