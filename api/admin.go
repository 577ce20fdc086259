package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/strictjson"
	"github.com/idemrun/idemrun/store"
)

// Admin API limits.
const (
	// MaxAdminBody bounds one admin request body (a 1 MiB job body is about
	// 1.4 MB once base64-encoded).
	MaxAdminBody = 4 << 20
	// MaxAdminBatchBody bounds a batch enqueue request body.
	MaxAdminBatchBody = 64 << 20
)

// Error codes of the admin API: stable, scripts may match on them.
const (
	CodeInvalid           = "invalid_input"
	CodeNotFound          = "not_found"
	CodeKeyConflict       = "key_conflict"
	CodeIllegalTransition = "illegal_transition"
	CodeUnauthorized      = "unauthorized"
	CodeTooLarge          = "too_large"
	CodeInternal          = "internal"
)

// WireHeader is a header line in admin API JSON.
type WireHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// WireEnqueue is the admin API's enqueue request body.
type WireEnqueue struct {
	Method           string       `json:"method,omitempty"`
	URL              string       `json:"url"`
	Headers          []WireHeader `json:"headers,omitempty"`
	Body             []byte       `json:"body,omitempty"` // base64 in JSON
	Key              string       `json:"key,omitempty"`
	KeyFormat        string       `json:"key_format,omitempty"`
	StatusURL        string       `json:"status_url,omitempty"`
	KeyTTL           Duration     `json:"key_ttl,omitempty"`
	MaxAttempts      int          `json:"max_attempts,omitempty"`
	Deadline         Duration     `json:"deadline,omitempty"`
	AttemptTimeout   Duration     `json:"attempt_timeout,omitempty"`
	ReplaySafe       bool         `json:"replay_safe,omitempty"`
	NoEffectStatuses []int        `json:"no_effect_statuses,omitempty"`
	RunAt            time.Time    `json:"run_at,omitzero"` // RFC 3339; zero: now
}

func toWire(req Request, o EnqueueOptions) WireEnqueue {
	w := WireEnqueue{Method: req.Method, URL: req.URL, Body: req.Body, Key: o.Key, StatusURL: o.StatusURL,
		KeyTTL: Duration(o.KeyTTL), MaxAttempts: o.MaxAttempts, Deadline: Duration(o.Deadline),
		AttemptTimeout: Duration(o.AttemptTimeout), ReplaySafe: o.ReplaySafe, NoEffectStatuses: o.NoEffectStatuses, RunAt: o.RunAt}
	if o.KeyFormat != idemkey.FormatToken {
		w.KeyFormat = o.KeyFormat.String()
	}
	for _, h := range req.Header {
		w.Headers = append(w.Headers, WireHeader{h.Name, h.Value})
	}
	return w
}

func (w WireEnqueue) parts() (Request, EnqueueOptions, error) {
	req := Request{Method: w.Method, URL: w.URL, Body: w.Body}
	for _, h := range w.Headers {
		req.Header = append(req.Header, Header{Name: h.Name, Value: h.Value})
	}
	o := EnqueueOptions{Key: w.Key, StatusURL: w.StatusURL, KeyTTL: time.Duration(w.KeyTTL), MaxAttempts: w.MaxAttempts,
		Deadline: time.Duration(w.Deadline), AttemptTimeout: time.Duration(w.AttemptTimeout), ReplaySafe: w.ReplaySafe,
		NoEffectStatuses: w.NoEffectStatuses, RunAt: w.RunAt}
	if w.KeyFormat != "" {
		f, err := idemkey.ParseFormat(w.KeyFormat)
		if err != nil {
			return req, o, invalid("key_format", w.KeyFormat, "token or structured")
		}
		o.KeyFormat = f
	}
	return req, o, nil
}

// WireError is the admin API's error body.
type WireError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// AdminOptions configures the admin handler.
type AdminOptions struct {
	// Token, when non-empty, is required as "Authorization: Bearer TOKEN"
	// on every request. The unix socket (mode 0600) needs none; TCP always
	// needs one.
	Token string
	// Metrics, when set, serves GET /metrics.
	Metrics http.Handler
}

// AdminHandler serves the admin API for svc: every CLI operation as JSON.
func AdminHandler(svc Service, o AdminOptions) http.Handler {
	mux := http.NewServeMux()
	a := &admin{svc: svc}
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("POST /v1/jobs", a.enqueue)
	mux.HandleFunc("POST /v1/jobs/batch", a.enqueueMany)
	mux.HandleFunc("GET /v1/jobs", a.list)
	mux.HandleFunc("GET /v1/jobs/{id}", a.get)
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", a.steer("cancel"))
	mux.HandleFunc("POST /v1/jobs/{id}/retry", a.steer("retry"))
	mux.HandleFunc("POST /v1/jobs/{id}/resolve", a.steer("resolve"))
	mux.HandleFunc("GET /v1/stats", a.stats)
	mux.HandleFunc("GET /v1/backup", a.backup)
	// GET patterns match HEAD too, and a HEAD of a backup would copy the
	// whole file for nothing.
	mux.HandleFunc("HEAD /v1/backup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeErr(w, http.StatusMethodNotAllowed, CodeInvalid, "HEAD /v1/backup: use GET")
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	if o.Token == "" {
		return mux
	}
	want := []byte(o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 9110 §11.1); the token is
		// compared in constant time.
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="idemrun"`)
			// Closed after the answer, without reading the rest of a
			// declared body first (which a client could trickle for as
			// long as it likes): a client without the token keeps no
			// connection.
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			writeErr(w, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token (--admin-token-file)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type admin struct{ svc Service }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	var e WireError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// errorCode maps an error to its HTTP status and stable code.
func errorCode(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, CodeInvalid
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, store.ErrKeyConflict):
		return http.StatusConflict, CodeKeyConflict
	case errors.Is(err, store.ErrIllegalTransition):
		return http.StatusConflict, CodeIllegalTransition
	default:
		return http.StatusInternalServerError, CodeInternal
	}
}

func fail(w http.ResponseWriter, err error) {
	status, code := errorCode(err)
	writeErr(w, status, code, err.Error())
}

// decode reads a JSON body of at most limit bytes, refusing unknown fields
// and trailing data.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: request body over %d bytes (%w)", ErrInvalid, limit, err)
		}
		return &InvalidError{Field: "request body", Value: "(JSON)", Accepted: "a complete request body (" + err.Error() + ")"}
	}
	return decodeStrict(b, v)
}

// decodeStrict decodes exactly one JSON object of v's shape from b,
// refusing unknown fields, trailing data and anything encoding/json would
// change on the way (bytes that are not UTF-8, lone surrogate escapes, a
// field given twice): a request is stored as its author wrote it.
func decodeStrict(b []byte, v any) error {
	if err := strictjson.Check(b); err != nil {
		return &InvalidError{Field: "request body", Value: "(JSON)", Accepted: "JSON as written: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &InvalidError{Field: "request body", Value: "(JSON)", Accepted: "a JSON object of the documented shape (" + err.Error() + ")"}
	}
	return onlyOne(dec)
}

// onlyOne refuses anything after the first JSON value (dec.More alone lets
// a stray "}" or "]" through).
func onlyOne(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		return &InvalidError{Field: "request body", Value: "(JSON)", Accepted: "exactly one JSON object, nothing after it"}
	}
	return nil
}

// DecodeEnqueue decodes an admin enqueue body; exported for fuzzing.
func DecodeEnqueue(b []byte) (WireEnqueue, error) {
	var w WireEnqueue
	return w, decodeStrict(b, &w)
}

type wireEnqueueResult struct {
	Job      *Job `json:"job"`
	Existing bool `json:"existing"`
}

func (a *admin) enqueue(w http.ResponseWriter, r *http.Request) {
	var in WireEnqueue
	if err := decode(w, r, MaxAdminBody, &in); err != nil {
		fail(w, err)
		return
	}
	req, o, err := in.parts()
	if err != nil {
		fail(w, err)
		return
	}
	res, err := a.svc.Enqueue(r.Context(), req, o)
	if err != nil {
		fail(w, err)
		return
	}
	res.Job.Existing = res.Existing
	code := http.StatusCreated
	if res.Existing {
		code = http.StatusOK
	}
	writeJSON(w, code, wireEnqueueResult{Job: res.Job, Existing: res.Existing})
}

type wireManyResult struct {
	Job      *Job       `json:"job,omitempty"`
	Existing bool       `json:"existing,omitempty"`
	Error    *wireCoded `json:"error,omitempty"`
}

type wireCoded struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (a *admin) enqueueMany(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Jobs []WireEnqueue `json:"jobs"`
	}
	if err := decode(w, r, MaxAdminBatchBody, &in); err != nil {
		fail(w, err)
		return
	}
	if len(in.Jobs) > 100000 {
		fail(w, invalid("jobs", strconv.Itoa(len(in.Jobs)), "at most 100000 jobs per batch"))
		return
	}
	// Only jobs whose wire form is valid reach EnqueueMany; at maps their
	// results back to their place in the request.
	out := make([]wireManyResult, len(in.Jobs))
	var items []ManyItem
	var at []int
	for i, wj := range in.Jobs {
		req, o, err := wj.parts()
		if err != nil {
			_, code := errorCode(err)
			out[i].Error = &wireCoded{Code: code, Message: err.Error()}
			continue
		}
		items = append(items, ManyItem{Request: req, Options: o})
		at = append(at, i)
	}
	res, err := a.svc.EnqueueMany(r.Context(), items)
	if err != nil {
		fail(w, err)
		return
	}
	for k, x := range res {
		i := at[k]
		if x.Err != nil {
			_, code := errorCode(x.Err)
			out[i].Error = &wireCoded{Code: code, Message: x.Err.Error()}
			continue
		}
		x.Job.Existing = x.Existing
		out[i] = wireManyResult{Job: x.Job, Existing: x.Existing}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func (a *admin) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ListFilter{Cursor: q.Get("cursor"), Oldest: q.Get("oldest") == "true"}
	for _, s := range q["state"] {
		for _, p := range strings.Split(s, ",") {
			st, err := store.ParseState(p)
			if err != nil {
				fail(w, invalid("state", p, "pending, running, unknown, succeeded, failed, needs_attention, canceled"))
				return
			}
			f.States = append(f.States, st)
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxListLimit {
			fail(w, invalid("limit", l, fmt.Sprintf("an integer from 1 to %d", store.MaxListLimit)))
			return
		}
		f.Limit = n
	}
	page, err := a.svc.List(r.Context(), f)
	if err != nil {
		fail(w, err)
		return
	}
	if page.Jobs == nil {
		page.Jobs = []*Job{}
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *admin) get(w http.ResponseWriter, r *http.Request) {
	j, err := a.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

type wireSteer struct {
	As    string `json:"as,omitempty"`
	Actor string `json:"actor,omitempty"`
	Note  string `json:"note,omitempty"`
}

func (a *admin) steer(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in wireSteer
		if r.ContentLength != 0 {
			if err := decode(w, r, 64<<10, &in); err != nil {
				fail(w, err)
				return
			}
		}
		id := r.PathValue("id")
		var j *Job
		var err error
		switch op {
		case "cancel":
			j, err = a.svc.Cancel(r.Context(), id, in.Actor, in.Note)
		case "retry":
			j, err = a.svc.Retry(r.Context(), id, in.Actor, in.Note)
		default:
			j, err = a.svc.Resolve(r.Context(), id, store.State(in.As), in.Actor, in.Note)
		}
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, j)
	}
}

func (a *admin) stats(w http.ResponseWriter, r *http.Request) {
	st, err := a.svc.Stats(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// backupStall is how long a backup's client may stop reading before the
// backup is abandoned: the copy is written from a read transaction, and
// while one is open bbolt cannot grow the file's mapping, so a client that
// stalls would in time stall every write, the runner's included.
var backupStall = 30 * time.Second

// stallWriter is the backup's response writer: each write must complete
// within backupStall, and none starts once the request is gone.
type stallWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(backupStall))
	return s.w.Write(p)
}

func (a *admin) backup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	sw := &stallWriter{w: w, rc: http.NewResponseController(w), ctx: r.Context()}
	if _, err := a.svc.Backup(r.Context(), sw); err != nil {
		// Headers may be gone; abort so the client sees a broken body, not a
		// short file that looks whole.
		panic(http.ErrAbortHandler)
	}
}
