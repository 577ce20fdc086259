package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/internal/redact"
	"github.com/idemrun/idemrun/store"
)

// SocketPath is where a runner serves its admin API for the database at
// dbPath: the file name plus ".sock".
func SocketPath(dbPath string) string { return dbPath + ".sock" }

// remote is the HTTP client of a runner's admin API (package admin
// serves it): what a Client uses when a runner holds its store.
type remote struct {
	base   string
	token  string
	where  string // the socket or address, for messages
	client *http.Client
	// extra, when set, redacts the views the runner answers with this
	// client's own sensitive names too: the runner knows only those its
	// store records.
	extra *redact.Redactor
}

// errSocketRefused marks an admin socket that is not this user's: Open
// then warns and opens the file instead.
var errSocketRefused = errors.New("admin socket refused")

// dialSocket connects to the admin socket beside the database at dbPath
// and checks that it answers within 2 seconds. The socket must be this
// user's and, where the system tells, so must the process serving it: a
// socket another user put there is refused, so no credential goes to it
// and no answer from it is trusted.
func dialSocket(dbPath string) (*remote, error) {
	sock := SocketPath(dbPath)
	if err := checkSocketFile(sock); err != nil {
		return nil, fmt.Errorf("%w: %w", errSocketRefused, err)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, err
			}
			if err := checkPeer(c); err != nil {
				c.Close()
				return nil, fmt.Errorf("%w: %w", errSocketRefused, err)
			}
			return c, nil
		},
		MaxIdleConnsPerHost: 4,
	}
	r := &remote{base: "http://idemrun", where: sock, client: &http.Client{Transport: tr, Timeout: 5 * time.Minute, CheckRedirect: noRedirects}}
	if err := r.ping(); err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("admin socket %s: %w", sock, err)
	}
	return r, nil
}

// dialTCP connects to an admin API served on TCP at addr (host:port) with
// a bearer token.
func dialTCP(addr, token string) (*remote, error) {
	// Its own transport, with no proxy: the bearer token goes to addr and
	// nowhere else (http.DefaultTransport would follow $HTTP_PROXY), and
	// closing the client closes only its own connections.
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
	r := &remote{base: "http://" + addr, token: token, where: addr, client: &http.Client{Transport: tr, Timeout: 5 * time.Minute, CheckRedirect: noRedirects}}
	if err := r.ping(); err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("admin api %s: %w", addr, err)
	}
	return r, nil
}

func (r *remote) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return r.do(ctx, http.MethodGet, adminwire.PathHealth, nil, nil)
}

// RemoteError is an error answered by a runner's admin API, with its
// stable code.
type RemoteError struct {
	Status  int
	Code    string
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// Is maps the admin API's codes back to the package sentinels, so callers
// (and the CLI's exit codes) treat remote and local errors alike.
func (e *RemoteError) Is(target error) bool {
	switch e.Code {
	case adminwire.CodeInvalid, adminwire.CodeTooLarge:
		return target == ErrInvalid
	case adminwire.CodeNotFound:
		return target == store.ErrNotFound
	case adminwire.CodeKeyConflict:
		return target == store.ErrKeyConflict
	case adminwire.CodeIllegalTransition:
		return target == store.ErrIllegalTransition
	case adminwire.CodeNotOffered:
		return target == ErrNotOffered
	}
	return false
}

func (r *remote) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	var sent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }}))
	resp, err := r.client.Do(req)
	if err != nil {
		if sent.Load() && method != http.MethodGet {
			// The runner may have done it before the connection went
			// (killed, restarted): the caller cannot know.
			return &OutcomeUnknownError{Err: err}
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var we adminwire.Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &we) == nil && we.Error.Code != "" {
			return &RemoteError{Status: resp.StatusCode, Code: we.Error.Code, Message: we.Error.Message}
		}
		return &RemoteError{Status: resp.StatusCode, Code: adminwire.CodeInternal, Message: fmt.Sprintf("admin api: %s: %s", resp.Status, strings.TrimSpace(string(b)))}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if method != http.MethodGet {
			return &OutcomeUnknownError{Err: fmt.Errorf("reading the runner's answer: %w", err)}
		}
		return err
	}
	return nil
}

// ErrOutcomeUnknown: a write sent to the runner through its admin API got
// no answer (the runner was killed or restarted, the connection broke), so
// it may or may not have been done. errors.Is(err, ErrOutcomeUnknown) on an
// *OutcomeUnknownError.
var ErrOutcomeUnknown = errors.New("the runner may or may not have done it")

// OutcomeUnknownError is returned by writes through a runner's admin API
// when the request was sent but no answer came. For Enqueue and
// EnqueueMany, Keys holds the idempotency key of each job sent (in the
// order of the items, generated here for items without one): enqueueing
// the same requests again under these keys is safe, and finds the jobs
// the runner did store.
type OutcomeUnknownError struct {
	Keys []string
	Err  error
}

func (e *OutcomeUnknownError) Error() string {
	msg := "admin api: no answer after the request was sent, so it may or may not have been done (" + e.Err.Error() + ")"
	if len(e.Keys) > 0 {
		msg += "; enqueueing again under the same keys is safe"
	}
	return msg
}

// Is reports ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// withKeys gives a key to each item that has none, on a copy, so a batch
// sent again after an unknown outcome is the same batch (P2).
func withKeys(items []ManyItem) []ManyItem {
	out, cloned := items, false
	for i := range items {
		if items[i].Options.Key == "" {
			if !cloned {
				out, cloned = slices.Clone(items), true
			}
			out[i].Options.Key = idemkey.New()
		}
	}
	return out
}

// keysOf lists the items' keys.
func keysOf(items []ManyItem) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = it.Options.Key
	}
	return keys
}

// enqueue sends one job that the client has validated.
func (r *remote) enqueue(ctx context.Context, req Request, o EnqueueOptions) (EnqueueResult, error) {
	if o.Key == "" {
		o.Key = idemkey.New() // here, so an unknown outcome can name it
	}
	var out adminwire.Enqueued[*Job]
	if err := r.do(ctx, http.MethodPost, adminwire.PathJobs, SpecOf(req, o), &out); err != nil {
		if ue, ok := errors.AsType[*OutcomeUnknownError](err); ok {
			ue.Keys = []string{o.Key}
		}
		return EnqueueResult{}, err
	}
	r.scrub(out.Job)
	return EnqueueResult{Job: out.Job, Existing: out.Existing}, nil
}

// batchBody is the admin API's body for a batch enqueue of the items that
// pass check (checked here because JSON would silently change bytes that
// are not UTF-8), refused when it is over adminwire.MaxBatchBody. at
// holds the position in items of each job in the body; invalid holds each
// other item's refusal, by position.
func batchBody(items []ManyItem, check func(*Request, *EnqueueOptions) error) (body []byte, at []int, invalid map[int]error, err error) {
	in := adminwire.Batch[EnqueueSpec]{Jobs: make([]EnqueueSpec, 0, len(items))}
	for i, it := range items {
		req, o := it.Request, it.Options
		req.Header = slices.Clone(req.Header)
		if err := check(&req, &o); err != nil {
			if invalid == nil {
				invalid = map[int]error{}
			}
			invalid[i] = err
			continue
		}
		in.Jobs = append(in.Jobs, SpecOf(req, o))
		at = append(at, i)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(b) > adminwire.MaxBatchBody {
		return nil, nil, nil, &InvalidError{Field: "batch", Value: fmt.Sprintf("(%d jobs, %d bytes as the admin API carries them)", len(items), len(b)),
			Accepted: fmt.Sprintf("at most %d bytes (64 MiB) per batch; split it into smaller ones", adminwire.MaxBatchBody)}
	}
	return b, at, invalid, nil
}

// CheckBatch refuses a batch the admin API could not carry in one request
// (over 64 MiB once encoded), so a caller such as the CLI can hold every
// batch to the same limit whether a runner holds the file or not.
func CheckBatch(items []ManyItem) error {
	c := validator(nil, nil)
	_, _, _, err := batchBody(items, c.validate)
	return err
}

// enqueueMany sends a batch; check validates (and fills the defaults of)
// each item first. As with the store, invalid jobs and key conflicts get
// their own Err and the others are stored. A returned error means nothing
// was stored, except an *OutcomeUnknownError (errors.Is
// ErrOutcomeUnknown): the batch was sent and may have been stored; its
// Keys let it be sent again safely.
func (r *remote) enqueueMany(ctx context.Context, items []ManyItem, check func(*Request, *EnqueueOptions) error) ([]ManyResult, error) {
	items = withKeys(items)
	in, at, invalid, err := batchBody(items, check)
	if err != nil {
		return nil, err
	}
	res := make([]ManyResult, len(items))
	for i, err := range invalid {
		res[i].Err = err
	}
	if len(at) == 0 {
		return res, nil
	}
	var out adminwire.Results[*Job]
	if err := r.do(ctx, http.MethodPost, adminwire.PathBatch, json.RawMessage(in), &out); err != nil {
		if ue, ok := errors.AsType[*OutcomeUnknownError](err); ok {
			ue.Keys = keysOf(items)
		}
		return nil, err
	}
	if len(out.Results) != len(at) {
		return nil, fmt.Errorf("api: the runner answered %d results for a batch of %d jobs", len(out.Results), len(at))
	}
	for k, x := range out.Results {
		i := at[k]
		r.scrub(x.Job)
		res[i] = ManyResult{Job: x.Job, Existing: x.Existing}
		if x.Error != nil {
			res[i].Err = &RemoteError{Code: x.Error.Code, Message: x.Error.Message}
		}
	}
	return res, nil
}

func (r *remote) get(ctx context.Context, idOrKey string) (*Job, error) {
	return r.getAt(ctx, idOrKey, "")
}

// getByKey looks the job up by its key alone (a key may be another job's
// id).
func (r *remote) getByKey(ctx context.Context, key string) (*Job, error) {
	return r.getAt(ctx, key, "?by=key")
}

func (r *remote) getAt(ctx context.Context, idOrKey, query string) (*Job, error) {
	if idOrKey == "" {
		return nil, errNoJob() // the path would name the collection, not a job
	}
	var j Job
	if err := r.do(ctx, http.MethodGet, adminwire.PathJobs+"/"+pathSegment(idOrKey)+query, nil, &j); err != nil {
		return nil, err
	}
	r.scrub(&j)
	return &j, nil
}

func (r *remote) list(ctx context.Context, f ListFilter) (ListPage, error) {
	if f.Limit < 0 {
		return ListPage{}, invalid("limit", strconv.Itoa(f.Limit), fmt.Sprintf("an integer from 1 to %d", store.MaxListLimit))
	}
	q := url.Values{}
	for _, s := range f.States {
		q.Add("state", string(s))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if f.Oldest {
		q.Set("oldest", "true")
	}
	for name, v := range map[string]string{"host": f.Host, "key_prefix": f.KeyPrefix, "id_prefix": f.IDPrefix, "sort": string(f.Sort)} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.Format(time.RFC3339Nano))
	}
	var p ListPage
	err := r.do(ctx, http.MethodGet, adminwire.PathJobs+"?"+q.Encode(), nil, &p)
	for _, j := range p.Jobs {
		r.scrub(j)
	}
	return p, err
}

// scrub applies the client's own sensitive names (r.extra) to a view the
// runner answered: header values and URL parameters by name, and the
// secrets they hold wherever the view's text quotes them, as a view made
// from the store is scrubbed.
func (r *remote) scrub(v *Job) {
	if r.extra == nil || v == nil {
		return
	}
	h := make(http.Header, len(v.Headers))
	for _, wh := range v.Headers {
		h.Add(wh.Name, wh.Value)
	}
	secrets := r.extra.Secrets(h, v.URL, v.StatusURL)
	text := func(s string) string {
		if s == "" {
			return s
		}
		return r.extra.String(s, secrets...)
	}
	for i := range v.Headers {
		v.Headers[i].Value = r.extra.HeaderValue(v.Headers[i].Name, v.Headers[i].Value)
	}
	v.URL, v.StatusURL = r.extra.URL(v.URL), r.extra.URL(v.StatusURL)
	v.LastError, v.Reason = text(v.LastError), text(v.Reason)
	if v.Result != nil {
		v.Result.Body = text(v.Result.Body)
		if v.Result.BodyBase64 != nil {
			v.Result.BodyBase64 = []byte(text(string(v.Result.BodyBase64)))
		}
	}
	for i := range v.History {
		e := &v.History[i]
		e.Error, e.Detail, e.Note = text(e.Error), text(e.Detail), text(e.Note)
	}
}

func (r *remote) stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := r.do(ctx, http.MethodGet, adminwire.PathStats, nil, &s)
	return s, err
}

// steer sends a cancel, retry or resolve (op) of the job id.
func (r *remote) steer(ctx context.Context, op, id string, in adminwire.Steer) (*Job, error) {
	if id == "" {
		return nil, errNoJob()
	}
	var j Job
	if err := r.do(ctx, http.MethodPost, adminwire.PathJobs+"/"+pathSegment(id)+"/"+op, in, &j); err != nil {
		return nil, err
	}
	r.scrub(&j)
	return &j, nil
}

// bulk sends a bulk action.
func (r *remote) bulk(ctx context.Context, in adminwire.Bulk) (BulkResult, error) {
	var res BulkResult
	err := r.do(ctx, http.MethodPost, adminwire.PathBulk, in, &res)
	return res, err
}

// hostPolicies lists the host policies: the policies of the hosts list.
func (r *remote) hostPolicies(ctx context.Context) ([]HostPolicy, error) {
	hs, err := r.hosts(ctx)
	if err != nil {
		return nil, err
	}
	var out []HostPolicy
	for _, h := range hs {
		if h.Policy != nil {
			out = append(out, *h.Policy)
		}
	}
	return out, nil
}

func (r *remote) hosts(ctx context.Context) ([]HostStatus, error) {
	var out adminwire.Hosts[HostStatus]
	if err := r.do(ctx, http.MethodGet, adminwire.PathHosts, nil, &out); err != nil {
		return nil, err
	}
	return out.Hosts, nil
}

// hostPath is the path of host's policy.
func hostPath(host string) string { return adminwire.PathHosts + "/" + pathSegment(host) }

func (r *remote) setHost(ctx context.Context, host string, in adminwire.HostSet) (HostPolicy, error) {
	var p HostPolicy
	err := r.do(ctx, http.MethodPut, hostPath(host), in, &p)
	return p, err
}

func (r *remote) unsetHost(ctx context.Context, host string) error {
	return r.do(ctx, http.MethodDelete, hostPath(host), nil, nil)
}

// hostAction sends a pause or resume (op) of host.
func (r *remote) hostAction(ctx context.Context, host, op string, in adminwire.Steer) (HostPolicy, error) {
	var p HostPolicy
	err := r.do(ctx, http.MethodPost, hostPath(host)+"/"+op, in, &p)
	return p, err
}

// backup streams a consistent copy of the database into w.
func (r *remote) backup(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+adminwire.PathBackup, nil)
	if err != nil {
		return 0, err
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("admin api: backup: %s", resp.Status)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("admin api: backup interrupted after %d bytes: %w", n, err)
	}
	return n, nil
}

// pathSegment escapes an id or key as one path segment; dots too, so "."
// and ".." are not taken as directory steps by path cleaning.
func pathSegment(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), ".", "%2E")
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// close releases idle connections.
func (r *remote) close() error {
	r.client.CloseIdleConnections()
	return nil
}

// errNoJob is the answer to an empty id or key: no job has it, as the
// store answers.
func errNoJob() error {
	return fmt.Errorf("%w: no job has the empty id or key", store.ErrNotFound)
}
