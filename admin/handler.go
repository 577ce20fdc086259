// Package admin serves a runner's admin API: every operation of
// api.Client as JSON over HTTP, on the unix socket beside the store
// (idemrun run serves it there) and, with a bearer token, on TCP.
//
// The API's client is api.Client itself: api.Open goes through this API
// when a runner holds the store, so the client lives in api, and this
// package, which needs every api operation, imports api. Every route,
// body and answer is in docs/admin-api.md. The JSON both
// sides agree on (paths, error codes, the bodies around jobs) is in
// internal/adminwire, below both; the enqueue body is api.EnqueueSpec,
// the one enqueue schema, which enqueue --from lines use too. Error
// answers are {"error": {"code": CODE, "message": TEXT}}, with CODE one
// of invalid_input, not_found, key_conflict, illegal_transition,
// unauthorized, too_large, not_offered and internal: stable, scripts may
// match on them. A refused token is 401 unauthorized; an address that
// failed too often is answered 429 unauthorized with Retry-After.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/internal/strictjson"
	"github.com/idemrun/idemrun/store"
)

// Options configures Handler.
type Options struct {
	// Token, when non-empty, is required as "Authorization: Bearer TOKEN"
	// on every request. The unix socket (mode 0600) needs none; TCP always
	// needs one, and CheckToken says whether it is strong enough. Each
	// client address may fail AuthBurst times, then once per AuthRefill;
	// meanwhile it is answered 429 with Retry-After.
	Token string
	// Logger receives a line for each refused token (the client's
	// address, never the token) and when an address is throttled; nil
	// means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the token throttle; nil means time.Now.
	Now func() time.Time
	// Metrics, when set, serves GET /metrics.
	Metrics http.Handler
	// BackupStall is how long a backup's client may stop reading before
	// the backup is abandoned: the copy is written from a read
	// transaction, and while one is open bbolt cannot grow the file's
	// mapping, so a client that stalls would in time stall every write,
	// the runner's included. Defaults to 30 seconds.
	BackupStall time.Duration
}

// Handler serves the admin API for c.
func Handler(c *api.Client, o Options) http.Handler {
	if o.BackupStall <= 0 {
		o.BackupStall = 30 * time.Second
	}
	mux := http.NewServeMux()
	a := &server{c: c, stall: o.BackupStall}
	mux.HandleFunc("GET "+adminwire.PathHealth, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("POST "+adminwire.PathJobs, a.enqueue)
	mux.HandleFunc("POST "+adminwire.PathBatch, a.enqueueMany)
	mux.HandleFunc("GET "+adminwire.PathJobs, a.list)
	mux.HandleFunc("GET "+adminwire.PathJobs+"/{id}", a.get)
	mux.HandleFunc("POST "+adminwire.PathJobs+"/{id}/cancel", a.steer("cancel"))
	mux.HandleFunc("POST "+adminwire.PathJobs+"/{id}/retry", a.steer("retry"))
	mux.HandleFunc("POST "+adminwire.PathJobs+"/{id}/resolve", a.steer("resolve"))
	mux.HandleFunc("POST "+adminwire.PathBulk, a.bulk)
	mux.HandleFunc("GET "+adminwire.PathStats, a.stats)
	mux.HandleFunc("GET "+adminwire.PathHosts, a.hosts)
	mux.HandleFunc("PUT "+adminwire.PathHosts+"/{host}", a.setHost)
	mux.HandleFunc("DELETE "+adminwire.PathHosts+"/{host}", a.unsetHost)
	mux.HandleFunc("POST "+adminwire.PathHosts+"/{host}/pause", a.hostAction("pause"))
	mux.HandleFunc("POST "+adminwire.PathHosts+"/{host}/resume", a.hostAction("resume"))
	mux.HandleFunc("GET "+adminwire.PathBackup, a.backup)
	// GET patterns match HEAD too, and a HEAD of a backup would copy the
	// whole file for nothing.
	mux.HandleFunc("HEAD "+adminwire.PathBackup, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeErr(w, http.StatusMethodNotAllowed, adminwire.CodeInvalid, "HEAD /v1/backup: use GET")
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	if o.Token == "" {
		return mux
	}
	return requireToken(mux, o)
}

type server struct {
	c     *api.Client
	stall time.Duration
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, adminwire.Error{Error: adminwire.Coded{Code: code, Message: msg}})
}

// errorCode maps an error to its HTTP status and stable code.
func errorCode(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, adminwire.CodeTooLarge
	case errors.Is(err, api.ErrInvalid):
		return http.StatusBadRequest, adminwire.CodeInvalid
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, adminwire.CodeNotFound
	case errors.Is(err, store.ErrKeyConflict):
		return http.StatusConflict, adminwire.CodeKeyConflict
	case errors.Is(err, store.ErrIllegalTransition):
		return http.StatusConflict, adminwire.CodeIllegalTransition
	case errors.Is(err, api.ErrNotOffered):
		return http.StatusNotImplemented, adminwire.CodeNotOffered
	default:
		return http.StatusInternalServerError, adminwire.CodeInternal
	}
}

func coded(err error) *adminwire.Coded {
	_, code := errorCode(err)
	return &adminwire.Coded{Code: code, Message: err.Error()}
}

func fail(w http.ResponseWriter, err error) {
	status, code := errorCode(err)
	writeErr(w, status, code, err.Error())
}

// read reads a request body of at most limit bytes.
func read(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: request body over %d bytes (%w)", api.ErrInvalid, limit, err)
		}
		return nil, &api.InvalidError{Field: "request body", Value: "(JSON)", Accepted: "a complete request body (" + err.Error() + ")"}
	}
	return b, nil
}

// decode reads a JSON body of at most limit bytes into v, refusing
// unknown fields, trailing data and anything JSON decoding would change.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	b, err := read(w, r, limit)
	if err != nil {
		return err
	}
	if err := strictjson.Decode(b, v); err != nil {
		return &api.InvalidError{Field: "request body", Value: "(JSON)", Accepted: err.Error()}
	}
	return nil
}

func (a *server) enqueue(w http.ResponseWriter, r *http.Request) {
	b, err := read(w, r, adminwire.MaxBody)
	if err != nil {
		fail(w, err)
		return
	}
	in, err := api.DecodeEnqueueDefaults(b)
	if err != nil {
		fail(w, err)
		return
	}
	req, o, err := in.Parts(time.Now())
	if err != nil {
		fail(w, err)
		return
	}
	res, err := a.c.Enqueue(r.Context(), req, o)
	if err != nil {
		fail(w, err)
		return
	}
	res.Job.Existing = res.Existing
	code := http.StatusCreated
	if res.Existing {
		code = http.StatusOK
	}
	writeJSON(w, code, adminwire.Enqueued[*api.Job]{Job: res.Job, Existing: res.Existing})
}

func (a *server) enqueueMany(w http.ResponseWriter, r *http.Request) {
	var in adminwire.Batch[json.RawMessage]
	if err := decode(w, r, adminwire.MaxBatchBody, &in); err != nil {
		fail(w, err)
		return
	}
	if len(in.Jobs) > adminwire.MaxBatchJobs {
		fail(w, api.Invalid("jobs", strconv.Itoa(len(in.Jobs)), fmt.Sprintf("at most %d jobs per batch", adminwire.MaxBatchJobs)))
		return
	}
	// Only jobs whose wire form is valid reach EnqueueMany; at maps their
	// results back to their place in the request.
	out := make([]adminwire.Item[*api.Job], len(in.Jobs))
	var items []api.ManyItem
	var at []int
	now := time.Now()
	for i, raw := range in.Jobs {
		spec, err := api.DecodeEnqueueDefaults(raw)
		if err != nil {
			out[i].Error = coded(err)
			continue
		}
		req, o, err := spec.Parts(now)
		if err != nil {
			out[i].Error = coded(err)
			continue
		}
		items = append(items, api.ManyItem{Request: req, Options: o})
		at = append(at, i)
	}
	res, err := a.c.EnqueueMany(r.Context(), items)
	if err != nil {
		fail(w, err)
		return
	}
	for k, x := range res {
		i := at[k]
		if x.Err != nil {
			out[i].Error = coded(x.Err)
			continue
		}
		x.Job.Existing = x.Existing
		out[i] = adminwire.Item[*api.Job]{Job: x.Job, Existing: x.Existing}
	}
	writeJSON(w, http.StatusOK, adminwire.Results[*api.Job]{Results: out})
}

func (a *server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := api.ListFilter{Cursor: q.Get("cursor"), Oldest: q.Get("oldest") == "true"}
	for _, s := range q["state"] {
		for _, p := range strings.Split(s, ",") {
			st, err := store.ParseState(p)
			if err != nil {
				fail(w, api.Invalid("state", p, "pending, running, unknown, succeeded, failed, needs_attention, canceled"))
				return
			}
			f.States = append(f.States, st)
		}
	}
	f.Host, f.KeyPrefix, f.IDPrefix, f.Sort = q.Get("host"), q.Get("key_prefix"), q.Get("id_prefix"), api.ListSort(q.Get("sort"))
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			tv, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				fail(w, api.Invalid(t.name, v, "a time in RFC 3339 (2026-01-02T15:04:05Z)"))
				return
			}
			*t.to = tv
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxListLimit {
			fail(w, api.Invalid("limit", l, fmt.Sprintf("an integer from 1 to %d", store.MaxListLimit)))
			return
		}
		f.Limit = n
	}
	page, err := a.c.List(r.Context(), f)
	if err != nil {
		fail(w, err)
		return
	}
	if page.Jobs == nil {
		page.Jobs = []*api.Job{}
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *server) get(w http.ResponseWriter, r *http.Request) {
	get := a.c.Get // by id, then by key
	if r.URL.Query().Get("by") == "key" {
		get = a.c.GetByKey // a key that is also another job's id
	}
	j, err := get(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (a *server) steer(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in adminwire.Steer
		if r.ContentLength != 0 {
			if err := decode(w, r, 64<<10, &in); err != nil {
				fail(w, err)
				return
			}
		}
		id := r.PathValue("id")
		var j *api.Job
		var err error
		switch op {
		case "cancel":
			j, err = a.c.Cancel(r.Context(), id, in.Actor, in.Note)
		case "retry":
			j, err = a.c.Retry(r.Context(), id, in.Actor, in.Note)
		default:
			j, err = a.c.Resolve(r.Context(), id, store.State(in.As), in.Actor, in.Note)
		}
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, j)
	}
}

func (a *server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := a.c.Stats(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// stallWriter is the backup's response writer: each write must complete
// within stall, and none starts once the request is gone.
type stallWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	stall time.Duration
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	return s.w.Write(p)
}

func (a *server) backup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	sw := &stallWriter{w: w, rc: http.NewResponseController(w), ctx: r.Context(), stall: a.stall}
	if _, err := a.c.Backup(r.Context(), sw); err != nil {
		// Headers may be gone; abort so the client sees a broken body, not a
		// short file that looks whole.
		panic(http.ErrAbortHandler)
	}
}
