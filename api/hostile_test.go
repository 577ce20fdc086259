package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/metrics"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// Every hostile input to the Go API is refused with the error it names,
// and nothing in the database changes.
func TestGoAPIHostileInputs(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{AllowHosts: []string{"127.0.0.1", "*.example.com"}})
	ctx := context.Background()
	na := apitest.NeedsAttention(t, c, "na-1")
	pending := apitest.EnqueueOK(t, c, apitest.HostileURL, "pending-1")
	cancelTarget := apitest.EnqueueOK(t, c, apitest.HostileURL+"/cancel", "cancel-target")

	req := func(mut func(r *api.Request)) api.Request {
		r := api.Request{Method: http.MethodPost, URL: apitest.HostileURL, Header: []api.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"amount":1}`)}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	enq := func(r api.Request, o api.EnqueueOptions) func() error {
		return func() error {
			res, err := c.Enqueue(ctx, r, o)
			if err == nil {
				return fmt.Errorf("enqueued job %s", res.Job.ID)
			}
			return err
		}
	}
	headers := func(n int, size int) []api.Header {
		var hs []api.Header
		for i := range n {
			hs = append(hs, api.Header{Name: fmt.Sprintf("X-H-%d", i), Value: strings.Repeat("v", size)})
		}
		return hs
	}
	list := func(f api.ListFilter) func() error {
		return func() error {
			p, err := c.List(ctx, f)
			if err == nil {
				return fmt.Errorf("listed %d jobs", len(p.Jobs))
			}
			return err
		}
	}
	steer := func(fn func() (*api.Job, error)) func() error {
		return func() error {
			j, err := fn()
			if err == nil {
				return fmt.Errorf("job %s is now %s", j.ID, j.State)
			}
			return err
		}
	}
	longNote := strings.Repeat("n", api.MaxNoteLen+1)

	tests := []struct {
		name  string
		call  func() error
		want  error
		field string // the InvalidError field, when want is api.ErrInvalid
	}{
		{"body over 1 MiB", enq(req(func(r *api.Request) { r.Body = make([]byte, api.MaxBodyLen+1) }), api.EnqueueOptions{}), api.ErrInvalid, "body"},
		{"101 headers", enq(req(func(r *api.Request) { r.Header = headers(api.MaxHeaders+1, 1) }), api.EnqueueOptions{}), api.ErrInvalid, "headers"},
		{"header bytes over 64 KiB", enq(req(func(r *api.Request) { r.Header = headers(2, 33<<10) }), api.EnqueueOptions{}), api.ErrInvalid, "headers"},
		{"URL over 8 KiB", enq(req(func(r *api.Request) { r.URL = apitest.HostileURL + "?q=" + strings.Repeat("a", api.MaxURLLen) }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"URL with user:password", enq(req(func(r *api.Request) { r.URL = "http://u:p@127.0.0.1:9/x" }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"ftp URL", enq(req(func(r *api.Request) { r.URL = "ftp://127.0.0.1/x" }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"URL with CR LF", enq(req(func(r *api.Request) { r.URL = apitest.HostileURL + "\r\nHost: evil" }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"key of 256 characters", enq(req(nil), api.EnqueueOptions{Key: strings.Repeat("k", 256)}), api.ErrInvalid, "key"},
		{"key with a space", enq(req(nil), api.EnqueueOptions{Key: "a b"}), api.ErrInvalid, "key"},
		{"key with a control character", enq(req(nil), api.EnqueueOptions{Key: "a\x01b"}), api.ErrInvalid, "key"},
		{"status-url over 2048 bytes", enq(req(nil), api.EnqueueOptions{StatusURL: apitest.HostileURL + "/{key}?" + strings.Repeat("p", api.MaxTemplateLen)}), api.ErrInvalid, "status-url"},
		{"status-url without a placeholder", enq(req(nil), api.EnqueueOptions{StatusURL: apitest.HostileURL + "/status"}), api.ErrInvalid, "status-url"},
		{"max attempts 101", enq(req(nil), api.EnqueueOptions{MaxAttempts: api.MaxAttemptsLimit + 1}), api.ErrInvalid, "max-attempts"},
		{"max attempts -1", enq(req(nil), api.EnqueueOptions{MaxAttempts: -1}), api.ErrInvalid, "max-attempts"},
		{"deadline 31 days", enq(req(nil), api.EnqueueOptions{Deadline: 31 * 24 * time.Hour}), api.ErrInvalid, "deadline"},
		{"negative deadline", enq(req(nil), api.EnqueueOptions{Deadline: -time.Second}), api.ErrInvalid, "deadline"},
		{"attempt timeout 11m", enq(req(nil), api.EnqueueOptions{AttemptTimeout: 11 * time.Minute}), api.ErrInvalid, "attempt-timeout"},
		{"key TTL 366 days", enq(req(nil), api.EnqueueOptions{KeyTTL: 366 * 24 * time.Hour}), api.ErrInvalid, "key-ttl"},
		{"negative key TTL", enq(req(nil), api.EnqueueOptions{KeyTTL: -time.Minute}), api.ErrInvalid, "key-ttl"},
		{"NUL in a header value", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "X-A", Value: "a\x00b"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header X-A"},
		{"CR LF in a header value", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "X-A", Value: "a\r\nX-B: b"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header X-A"},
		{"unicode in a header name", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "Nämé", Value: "x"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header name"},
		{"Idempotency-Key header", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "idempotency-key", Value: "mine"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header name"},
		{"Transfer-Encoding header", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "Transfer-Encoding", Value: "chunked"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header name"},
		{"method with a space", enq(req(func(r *api.Request) { r.Method = "PO ST" }), api.EnqueueOptions{}), api.ErrInvalid, "method"},
		{"method over 32 bytes", enq(req(func(r *api.Request) { r.Method = strings.Repeat("P", 33) }), api.EnqueueOptions{}), api.ErrInvalid, "method"},
		{"no-effect status 200", enq(req(nil), api.EnqueueOptions{NoEffectStatuses: []int{503, 200}}), api.ErrInvalid, "no-effect-status"},
		{"unknown key format", enq(req(nil), api.EnqueueOptions{KeyFormat: idemkey.Format(99)}), api.ErrInvalid, "key-format"},
		{"allowlist refuses another host", enq(req(func(r *api.Request) { r.URL = "http://example.org/pay" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses a look-alike suffix", enq(req(func(r *api.Request) { r.URL = "https://a.example.com.evil.org/pay" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses 169.254.169.254", enq(req(func(r *api.Request) { r.URL = "http://169.254.169.254/latest/meta-data" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses [fe80::1]", enq(req(func(r *api.Request) { r.URL = "http://[fe80::1]/x" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses a status-url host", enq(req(nil), api.EnqueueOptions{StatusURL: "http://example.org/s/{key}"}), api.ErrInvalid, "url host"},
		{"EnqueueMany with every item invalid", func() error {
			res, err := c.EnqueueMany(ctx, []api.ManyItem{
				{Request: req(func(r *api.Request) { r.URL = "ftp://x/" })},
				{Request: req(nil), Options: api.EnqueueOptions{Key: strings.Repeat("k", 256)}},
				{Request: req(func(r *api.Request) { r.Header = headers(api.MaxHeaders+1, 1) })},
			})
			if err != nil {
				return err
			}
			for i, r := range res {
				if !errors.Is(r.Err, api.ErrInvalid) {
					return fmt.Errorf("item %d: got %v, want ErrInvalid", i, r.Err)
				}
			}
			return res[0].Err
		}, api.ErrInvalid, "url"},
		{"List limit 10001", list(api.ListFilter{Limit: store.MaxListLimit + 1}), api.ErrInvalid, "limit"},
		{"List limit -1", list(api.ListFilter{Limit: -1}), api.ErrInvalid, "limit"},
		{"List unknown state", list(api.ListFilter{States: []api.State{"bogus"}}), api.ErrInvalid, "state"},
		{"List cursor not hex", list(api.ListFilter{Cursor: "zz"}), api.ErrInvalid, "cursor"},
		{"List cursor of the wrong length", list(api.ListFilter{Cursor: "abcd"}), api.ErrInvalid, "cursor"},
		{"Resolve as pending", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StatePending, "t", "checked") }), api.ErrInvalid, "as"},
		{"Resolve without a note", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StateSucceeded, "t", "") }), api.ErrInvalid, "note"},
		{"Resolve with a blank note", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StateSucceeded, "t", " \t\n") }), api.ErrInvalid, "note"},
		{"Resolve note over 4096 bytes", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StateSucceeded, "t", longNote) }), api.ErrInvalid, "note"},
		{"Resolve an unknown job", steer(func() (*api.Job, error) { return c.Resolve(ctx, "no-such-job", store.StateFailed, "t", "checked") }), store.ErrNotFound, ""},
		{"Resolve a pending job", steer(func() (*api.Job, error) { return c.Resolve(ctx, pending.ID, store.StateFailed, "t", "checked") }), store.ErrIllegalTransition, ""},
		{"Cancel an unknown job", steer(func() (*api.Job, error) { return c.Cancel(ctx, "../../etc/passwd", "t", "") }), store.ErrNotFound, ""},
		{"Cancel a needs_attention job", steer(func() (*api.Job, error) { return c.Cancel(ctx, na.ID, "t", "") }), store.ErrIllegalTransition, ""},
		{"Retry a pending job", steer(func() (*api.Job, error) { return c.Retry(ctx, pending.Key, "t", "") }), store.ErrIllegalTransition, ""},
		{"Cancel note over 4096 bytes", steer(func() (*api.Job, error) { return c.Cancel(ctx, cancelTarget.ID, "t", longNote) }), api.ErrInvalid, "note"},
	}
	for _, tc := range tests {
		before := apitest.Snapshot(t, c)
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got error %v, want %v", tc.name, err, tc.want)
		} else if tc.want == api.ErrInvalid {
			var ie *api.InvalidError
			if !errors.As(err, &ie) {
				t.Errorf("%s: got %T %v, want an *api.InvalidError", tc.name, err, err)
			} else if ie.Field != tc.field {
				t.Errorf("%s: got field %q (%v), want %q", tc.name, ie.Field, err, tc.field)
			}
		}
		if after := apitest.Snapshot(t, c); after != before {
			t.Errorf("%s: the database changed:\n got %s\nwant %s", tc.name, apitest.Clip(after), apitest.Clip(before))
		}
	}
	// Controls: the same client accepts the limits' edges.
	edge := api.EnqueueOptions{Key: strings.Repeat("k", 255), MaxAttempts: api.MaxAttemptsLimit, Deadline: api.MaxDeadline,
		AttemptTimeout: api.MaxAttemptTimeout, KeyTTL: api.MaxKeyTTL, NoEffectStatuses: []int{503}}
	if _, err := c.Enqueue(ctx, req(func(r *api.Request) { r.Body = make([]byte, api.MaxBodyLen); r.Header = headers(api.MaxHeaders, 10) }), edge); err != nil {
		t.Errorf("enqueue at every limit's edge: %v", err)
	}
	if _, err := c.Enqueue(ctx, req(func(r *api.Request) { r.URL = "https://a.example.com/pay" }), api.EnqueueOptions{}); err != nil {
		t.Errorf("enqueue to an allowlisted subdomain: %v", err)
	}
}

const (
	plantedBearer = "planted-secret-xyz"
	plantedKey    = "planted-key-abc"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers and readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A planted bearer token and api_key URL parameter are sent to the target
// but never shown: not in job views, admin answers, metrics, runner logs
// at debug level, nor the error and history texts the runner stores — even
// when the target echoes them back and when the error text quotes the URL.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()

	var mu sync.Mutex
	var got []*http.Request
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(context.Background()))
		mu.Unlock()
		echo := fmt.Sprintf(`{"authorization":%q,"query":%q}`, r.Header.Get("Authorization"), r.URL.RawQuery)
		switch r.URL.Path {
		case "/echo-400":
			w.WriteHeader(http.StatusBadRequest)
		case "/echo-500":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
		io.WriteString(w, echo)
	}))
	t.Cleanup(tg.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	auth := []api.Header{{Name: "Authorization", Value: "Bearer " + plantedBearer}, {Name: "Content-Type", Value: "application/json"}}
	jobs := map[string]struct {
		url, state string
		attempts   int
	}{
		"refused":  {closed + "/pay?api_key=" + plantedKey, "failed", 2},
		"echo-400": {tg.URL + "/echo-400?api_key=" + plantedKey, "failed", 1},
		"echo-200": {tg.URL + "/echo-200?api_key=" + plantedKey, "succeeded", 1},
		"echo-500": {tg.URL + "/echo-500?api_key=" + plantedKey, "needs_attention", 1},
	}
	ids := map[string]string{}
	for key, j := range jobs {
		res, err := c.Enqueue(ctx, api.Request{URL: j.url, Header: auth, Body: []byte(`{"amount":1}`)}, api.EnqueueOptions{Key: key, MaxAttempts: 2})
		if err != nil {
			t.Fatalf("Enqueue(%s): %v", key, err)
		}
		ids[key] = res.Job.ID
	}

	logs := &lockedBuffer{}
	m := metrics.New(c.Store())
	r, err := c.NewRunner(runner.Config{
		UntilIdle:     true,
		Backoff:       runner.Backoff{Base: 2 * time.Millisecond, Cap: 10 * time.Millisecond},
		QuietPeriod:   10 * time.Millisecond,
		StartupSpread: time.Millisecond,
		PollInterval:  20 * time.Millisecond,
		Rand:          runner.NewRand(7),
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent:       m.ObserveEvent,
	})
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := r.Run(rctx); err != nil || rctx.Err() != nil {
		t.Fatalf("Run: %v (ctx %v)", err, rctx.Err())
	}

	// The target did receive the real values.
	mu.Lock()
	if len(got) != 3 {
		t.Errorf("target got %d requests, want 3 (one per reachable job)", len(got))
	}
	for _, rq := range got {
		if rq.Header.Get("Authorization") != "Bearer "+plantedBearer || rq.URL.Query().Get("api_key") != plantedKey {
			t.Errorf("target %s got Authorization %q query %q, want the planted values", rq.URL.Path, rq.Header.Get("Authorization"), rq.URL.RawQuery)
		}
	}
	mu.Unlock()

	var shown []string
	show := func(where string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		shown = append(shown, where+": "+string(b))
	}
	for key, want := range jobs {
		v, err := c.Get(ctx, ids[key])
		if err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
		if string(v.State) != want.state || v.Attempts != want.attempts {
			t.Errorf("job %s: got state %s after %d attempts (last_error %q), want %s after %d", key, v.State, v.Attempts, v.LastError, want.state, want.attempts)
		}
		if !strings.Contains(v.URL, "api_key=REDACTED") || len(v.Headers) == 0 || v.Headers[0].Value != "Bearer REDACTED" {
			t.Errorf("job %s view: url %q headers %v, want both shown redacted", key, v.URL, v.Headers)
		}
		show("Get "+key, v)
		byKey, err := c.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get by key %s: %v", key, err)
		}
		show("Get by key "+key, byKey)
		sj, err := c.Store().Get(ids[key])
		if err != nil {
			t.Fatal(err)
		}
		texts := []string{sj.LastError, sj.Reason}
		for _, e := range sj.History {
			texts = append(texts, e.Error, e.Detail, e.Note)
		}
		shown = append(shown, "stored texts of "+key+": "+strings.Join(texts, " | "))
	}
	if v, _ := c.Get(ctx, "refused"); v == nil || !strings.Contains(v.LastError, "refused") {
		t.Errorf("refused job: last_error %q, want the connection error kept (redacted)", v.LastError)
	}
	page, err := c.List(ctx, api.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	show("List", page)

	admin := httptest.NewServer(admin.Handler(c, admin.Options{Metrics: m.Handler()}))
	t.Cleanup(admin.Close)
	paths := []string{"/v1/jobs", "/v1/jobs?state=failed", "/v1/stats", "/metrics"}
	for key, id := range ids {
		paths = append(paths, "/v1/jobs/"+id, "/v1/jobs/"+url.PathEscape(key))
	}
	for _, p := range paths {
		resp, err := admin.Client().Get(admin.URL + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: got %d %s, want 200", p, resp.StatusCode, apitest.Clip(b))
		}
		shown = append(shown, "GET "+p+": "+string(b))
	}
	if !strings.Contains(logs.String(), "attempt finished") {
		t.Errorf("runner logs at debug level have no attempt lines:\n%s", logs)
	}
	shown = append(shown, "runner logs: "+logs.String())
	for _, s := range shown {
		for _, secret := range []string{plantedBearer, plantedKey} {
			if strings.Contains(s, secret) {
				t.Errorf("%s leaks %q:\n%s", s[:strings.Index(s, ":")], secret, apitest.Clip(s))
			}
		}
	}
}

// A refused URL is quoted back without its credentials: a password in the
// userinfo or a credential-like query parameter never appears in the error
// (which the CLI prints and the admin API returns), however the URL is
// malformed.
func TestRefusalsDoNotEchoSecrets(t *testing.T) {
	t.Parallel()
	const secret = "pa55word-planted"
	for _, raw := range []string{
		"http://user:" + secret + "@h/x",
		"http://user:" + secret + "@h:99999/",
		"http://user:" + secret + "@h/ x",
		"ftp://user:" + secret + "@h/",
		"http://h/?api_key=" + secret + "&x=\x01",
		"http://[::1/?token=" + secret,
		"gopher://h/?access_token=" + secret,
	} {
		err := api.ValidateURL("url", raw)
		if err == nil {
			t.Errorf("ValidateURL(%q): accepted, want refused", raw)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ValidateURL(%q): error %q echoes the credential", raw, err)
		}
	}
}
