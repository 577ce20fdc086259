package api_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/metrics"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

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

// A job object from a runner older than attempts_left (the admin API
// between a new CLI and an old runner) reads as that runner meant it:
// max_attempts - attempts left, not 0 (found in a review).
func TestJobFromOlderRunnerHasAttemptsLeft(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`{"id":"a","attempts":0,"max_attempts":3}`, 3},
		{`{"id":"a","attempts":1,"max_attempts":2}`, 1},
		{`{"id":"a","attempts":4,"max_attempts":2}`, 0},
		{`{"id":"a","attempts":4,"max_attempts":2,"attempts_left":0}`, 0},
		{`{"id":"a","attempts":4,"max_attempts":2,"attempts_left":1}`, 1},
	} {
		var j api.Job
		if err := json.Unmarshal([]byte(c.in), &j); err != nil {
			t.Fatal(err)
		}
		if j.AttemptsLeft != c.want || j.ID != "a" {
			t.Errorf("%s: attempts_left %d (id %q), want %d", c.in, j.AttemptsLeft, j.ID, c.want)
		}
	}
}

// claimAs claims the job under key for the runner owner, as that runner
// would before its attempt.
func claimAs(t *testing.T, c *api.Client, key, owner string) {
	t.Helper()
	claims, err := c.Store().ClaimDue(context.Background(), store.ClaimRequest{State: store.StatePending, Now: time.Now().Add(time.Second), Limit: 1, Owner: owner})
	if err != nil || len(claims) != 1 || claims[0].Job.Key != key {
		t.Fatalf("claiming %s for %s: %d claims, %v", key, owner, len(claims), err)
	}
}

// A running job's view names its runner and says whether that runner's
// lease is alive, in Get and List alike, on the file and through the
// runner's socket; jobs in other states name no runner.
func TestRunningJobShowsItsLease(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	if err := c.Store().Register(ctx, store.RunnerInfo{ID: "live-runner", Workers: 1}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Store().Deregister(ctx, "live-runner") })
	apitest.EnqueueOK(t, c, apitest.HostileURL, "lease-gone")
	// gone-runner claims, then its lease ends (as when it stops).
	if err := c.Store().Register(ctx, store.RunnerInfo{ID: "gone-runner", Workers: 1}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	claimAs(t, c, "lease-gone", "gone-runner")
	if err := c.Store().Deregister(ctx, "gone-runner"); err != nil {
		t.Fatal(err)
	}
	apitest.EnqueueOK(t, c, apitest.HostileURL, "lease-live")
	claimAs(t, c, "lease-live", "live-runner")
	apitest.EnqueueOK(t, c, apitest.HostileURL, "lease-pending")

	want := map[string][2]string{"lease-gone": {"gone-runner", api.LeaseExpired}, "lease-live": {"live-runner", api.LeaseAlive}, "lease-pending": {"", ""}}
	for name, cl := range map[string]*api.Client{"file": c, "socket": rem} {
		page, err := cl.List(ctx, api.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]*api.Job{}
		for _, j := range page.Jobs {
			listed[j.Key] = j
		}
		for key, w := range want {
			j, err := cl.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			for how, v := range map[string]*api.Job{"Get": j, "List": listed[key]} {
				if v == nil || v.Owner != w[0] || v.Lease != w[1] || v.RunnerGone() != (w[1] == api.LeaseExpired) {
					t.Errorf("%s %s %s: owner %q lease %q, want %q %q", name, how, key, v.Owner, v.Lease, w[0], w[1])
				}
			}
		}
	}
}

// A target's error body that echoes the job's bearer token is scrubbed when
// it is valid UTF-8, but a body with one non-UTF-8 byte (a Latin-1 error
// page) is shown whole as body_base64, token included.
func TestNonUTF8ResultBodyIsScrubbed(t *testing.T) {
	const tok = "sk_live_tokenABC123"
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Ung\xfcltiges Token: "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	t.Cleanup(tg.Close)
	res, err := c.Enqueue(ctx, api.Request{URL: tg.URL + "/pay", Header: []api.Header{{Name: "Authorization", Value: "Bearer " + tok}}, Body: []byte("{}")},
		api.EnqueueOptions{Key: "latin1", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	runIdle(t, c, runner.Config{})
	v, err := c.Get(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result == nil {
		t.Fatalf("no result recorded (state %s)", v.State)
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(v.Result.BodyBase64), tok) || strings.Contains(v.Result.Body, tok) {
		t.Errorf("state %s: result shows the bearer token; JSON view:\n%s", v.State, b)
	}
}

// A secret carried only by the status-url template (its own api_key, not
// the job's) must not reach the views: history errors that quote the
// expanded status URL, or a status answer that echoes it.
func TestStatusURLSecretNeverShown(t *testing.T) {
	const statusSecret = "status-secret-q9z"
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()

	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ops") {
			// A status API that echoes the query it was asked.
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"succeeded","query":"`+r.URL.RawQuery+`"}`)
			return
		}
		w.WriteHeader(http.StatusInternalServerError) // unknown outcome
	}))
	t.Cleanup(tg.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	jobs := map[string]string{
		"status-refused": closed + "/ops?api_key=" + statusSecret + "&k={key}",
		"status-echo":    tg.URL + "/ops?api_key=" + statusSecret + "&k={key}",
	}
	ids := map[string]string{}
	for key, su := range jobs {
		res, err := c.Enqueue(ctx, api.Request{URL: tg.URL + "/pay", Body: []byte(`{}`)},
			api.EnqueueOptions{Key: key, MaxAttempts: 1, StatusURL: su})
		if err != nil {
			t.Fatalf("Enqueue(%s): %v", key, err)
		}
		ids[key] = res.Job.ID
	}
	runIdle(t, c, runner.Config{
		QuietPeriod: 5 * time.Millisecond, StatusBudget: 1,
		StatusBackoff: runner.Backoff{Base: 2 * time.Millisecond, Cap: 5 * time.Millisecond},
		Backoff:       runner.Backoff{Base: 2 * time.Millisecond, Cap: 5 * time.Millisecond},
	})
	for key, id := range ids {
		v, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), statusSecret) {
			t.Errorf("job %s (state %s): view leaks the status-url secret:\n%s", key, v.State, b)
		}
	}
}

// runIdle runs a runner on c with cfg (UntilIdle, a short startup spread
// and poll interval added) until no job is left to work, for at most 15 s.
func runIdle(t *testing.T, c *api.Client, cfg runner.Config) {
	t.Helper()
	cfg.UntilIdle = true
	cfg.StartupSpread = time.Millisecond
	cfg.PollInterval = 10 * time.Millisecond
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// The job's own api_key is scrubbed from error texts by plain substring
// match, but net/http quotes the URL with %q: a value with a quote,
// backslash or non-printable rune is escaped in the text and no longer
// matches.
func TestQuotedURLSecretIsScrubbed(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	secrets := map[string]string{"q-quote": `pk"quoted1234`, "q-bslash": `pk\bslash1234`, "q-nbsp": "pk\u00a0nbsp1234"}
	for key, sec := range secrets {
		u := closed + "/pay?api_key=" + sec
		if _, err := api.Validate(api.Request{URL: u}, api.EnqueueOptions{}, nil); err != nil {
			t.Logf("%s: URL refused at enqueue (fine): %v", key, err)
			delete(secrets, key)
			continue
		}
		if _, err := c.Enqueue(ctx, api.Request{URL: u, Body: []byte("{}")}, api.EnqueueOptions{Key: key, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	runIdle(t, c, runner.Config{})
	for key, sec := range secrets {
		v, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		core := sec[len(sec)-8:] // past the odd byte: "ted1234"-like tail
		if strings.Contains(v.LastError, core) || strings.Contains(string(b), core) {
			t.Errorf("%s: view shows the api_key value %q: last_error %q", key, sec, v.LastError)
		}
	}
}
