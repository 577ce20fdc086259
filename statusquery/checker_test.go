package statusquery_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/statusquery"
)

var _ statusquery.Checker = (*statusquery.HTTPChecker)(nil)
var _ statusquery.Checker = statusquery.CheckerFunc(nil)
var _ statusquery.Doer = (*http.Client)(nil)

// newServer starts a test server on 127.0.0.1 and closes it when the test
// ends.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// newChecker returns a checker whose idle connections close with the test.
func newChecker(t *testing.T, c *statusquery.HTTPChecker) *statusquery.HTTPChecker {
	t.Helper()
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// doerFunc is a Doer written inline by a test.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// TestHTTPCheckerProtocol runs the ARCHITECTURE.md §5 table through a real server.
func TestHTTPCheckerProtocol(t *testing.T) {
	t.Parallel()
	cases := protocolCases()
	var followed atomic.Int32
	var badRequests atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		if r.Method != http.MethodGet || r.Header.Get("Accept") != "application/json" ||
			r.Header.Get("User-Agent") != statusquery.DefaultUserAgent || r.URL.Path != "/ops/key-1" {
			badRequests.Add(1)
		}
		i, err := strconv.Atoi(r.URL.Query().Get("case"))
		if err != nil || i < 0 || i >= len(cases) {
			http.Error(w, "no such case", http.StatusTeapot)
			return
		}
		tc := cases[i]
		if tc.status >= 300 && tc.status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		// The rows test how bodies are read; a declared JSON type keeps
		// net/http from sniffing "text/html", which has its own rule
		// (TestHTMLCatchAllIsNoAnswer).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(tc.status)
		io.WriteString(w, tc.body)
	}))
	c := newChecker(t, &statusquery.HTTPChecker{})
	for i, tc := range cases {
		if tc.noHTTP {
			continue
		}
		a := c.Check(context.Background(), statusquery.Query{
			JobID:    "job-1",
			Key:      "key-1",
			Template: srv.URL + "/ops/{key}?case=" + strconv.Itoa(i),
		})
		if a.Outcome != tc.want || a.Detail != tc.wantDetail || a.HTTPStatus != tc.status ||
			string(a.Body) != tc.body || a.Truncated || a.Err != nil {
			t.Errorf("%s: Check = {%q %d %.40q trunc=%v %q err=%v}; want {%q %d %.40q trunc=false %q err=nil}",
				tc.name, a.Outcome, a.HTTPStatus, a.Body, a.Truncated, a.Detail, a.Err,
				tc.want, tc.status, tc.body, tc.wantDetail)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("redirect targets hit %d times; want 0", n)
	}
	if n := badRequests.Load(); n != 0 {
		t.Errorf("server saw %d malformed status queries; want 0", n)
	}
}

func TestHTTPCheckerBodyCap(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"/huge-empty-list": "[" + strings.Repeat(" ", 100<<10) + "]",
		"/exact":           "[]" + strings.Repeat(" ", 62),
		"/one-over":        "[]" + strings.Repeat(" ", 63),
		"/failed":          `[{"status":"failed"}]`,
		"/huge-404":        strings.Repeat("x", 200<<10),
	}
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/huge-404" {
			w.WriteHeader(http.StatusNotFound)
		}
		io.WriteString(w, bodies[r.URL.Path])
	}))
	for _, tc := range []struct {
		path      string
		limit     int64
		want      statusquery.Outcome
		detail    string
		bodyLen   int
		truncated bool
	}{
		{"/huge-empty-list", 0, statusquery.NoAnswer, "body over cap, no in-progress status before the cut", statusquery.DefaultBodyLimit, true},
		{"/exact", 64, statusquery.NotFound, "0 items", 64, false},
		{"/one-over", 64, statusquery.NoAnswer, "body over cap, no in-progress status before the cut", 64, true},
		{"/failed", 16, statusquery.NoAnswer, "body over cap, no in-progress status before the cut", 16, true},
		{"/failed", 1 << 40, statusquery.FoundFailed, `1 item, status "failed"`, 21, false},
		{"/huge-404", 0, statusquery.NotFound, "404 not found", statusquery.DefaultBodyLimit, true},
	} {
		c := newChecker(t, &statusquery.HTTPChecker{BodyLimit: tc.limit})
		a := c.Check(context.Background(), statusquery.Query{Key: "k", Template: srv.URL + tc.path + "?k={key}"})
		if a.Outcome != tc.want || a.Detail != tc.detail || len(a.Body) != tc.bodyLen || a.Truncated != tc.truncated || a.Err != nil {
			t.Errorf("%s limit %d: Check = {%q %q len=%d trunc=%v err=%v}; want {%q %q len=%d trunc=%v err=nil}",
				tc.path, tc.limit, a.Outcome, a.Detail, len(a.Body), a.Truncated, a.Err, tc.want, tc.detail, tc.bodyLen, tc.truncated)
		}
		if want := bodies[tc.path][:tc.bodyLen]; string(a.Body) != want {
			t.Errorf("%s limit %d: body is not the answer's first %d bytes", tc.path, tc.limit, tc.bodyLen)
		}
	}
}

// TestHTTPCheckerEndlessBody checks that an answer that never ends costs a
// bounded read: the checker stops and the server sees the connection go.
func TestHTTPCheckerEndlessBody(t *testing.T) {
	t.Parallel()
	const maxWrite = 256 << 20
	written := make(chan int, 1)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte(" "), 32<<10)
		io.WriteString(w, "[")
		n := 1
		for n < maxWrite {
			m, err := w.Write(chunk)
			n += m
			if err != nil {
				break
			}
		}
		written <- n
	}))
	c := newChecker(t, &statusquery.HTTPChecker{Timeout: 10 * time.Second})
	a := c.Check(context.Background(), statusquery.Query{Key: "k", Template: srv.URL + "/ops/{key}"})
	if a.Outcome != statusquery.NoAnswer || !strings.HasPrefix(a.Detail, "body over cap") || !a.Truncated || len(a.Body) != statusquery.DefaultBodyLimit {
		t.Errorf("Check = {%q %q trunc=%v len=%d err=%v}; want {no_answer \"body over cap...\" trunc=true len=%d}",
			a.Outcome, a.Detail, a.Truncated, len(a.Body), a.Err, statusquery.DefaultBodyLimit)
	}
	select {
	case n := <-written:
		if n >= maxWrite {
			t.Errorf("server wrote %d bytes; want the client to hang up well before %d", n, maxWrite)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("server still writing 10s after Check returned; want the connection closed")
	}
}

// hangingServer answers after release is closed, at cleanup. With
// headerFirst it sends the status and the first body byte before hanging.
func hangingServer(t *testing.T, headerFirst bool) (srv *httptest.Server, arrived <-chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	got := make(chan struct{}, 16)
	srv = newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerFirst {
			io.WriteString(w, "[")
			w.(http.Flusher).Flush()
		}
		got <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, got
}

func TestHTTPCheckerTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		headerFirst bool
		status      int
		detail      string
	}{
		{"no header", false, 0, "timeout after 100ms"},
		{"body stalls", true, 200, "timeout after 100ms while reading body"},
	} {
		srv, arrived := hangingServer(t, tc.headerFirst)
		c := newChecker(t, &statusquery.HTTPChecker{Timeout: 100 * time.Millisecond})
		start := time.Now()
		a := c.Check(context.Background(), statusquery.Query{Key: "k", Template: srv.URL + "/ops/{key}"})
		elapsed := time.Since(start)
		if a.Outcome != statusquery.NoAnswer || a.Detail != tc.detail || a.HTTPStatus != tc.status ||
			!errors.Is(a.Err, context.DeadlineExceeded) || !strings.HasPrefix(a.Err.Error(), "statusquery: ") {
			t.Errorf("%s: Check = {%q %d %q err=%v}; want {no_answer %d %q err=deadline exceeded}",
				tc.name, a.Outcome, a.HTTPStatus, a.Detail, a.Err, tc.status, tc.detail)
		}
		if elapsed < 100*time.Millisecond || elapsed > 3*time.Second {
			t.Errorf("%s: Check took %v; want about the 100ms timeout", tc.name, elapsed)
		}
		select {
		case <-arrived:
		default:
			t.Errorf("%s: server never saw the query", tc.name)
		}
	}
}

func TestHTTPCheckerCallerCanceled(t *testing.T) {
	t.Parallel()
	srv, arrived := hangingServer(t, false)
	c := newChecker(t, &statusquery.HTTPChecker{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answers := make(chan statusquery.Answer, 1)
	go func() {
		answers <- c.Check(ctx, statusquery.Query{Key: "k", Template: srv.URL + "/ops/{key}"})
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("server never saw the query")
	}
	cancel()
	select {
	case a := <-answers:
		if a.Outcome != statusquery.NoAnswer || a.Detail != "canceled" || !errors.Is(a.Err, context.Canceled) {
			t.Errorf("Check = {%q %q err=%v}; want {no_answer \"canceled\" err=context canceled}", a.Outcome, a.Detail, a.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Check did not return 10s after its context was canceled")
	}
}

func TestHTTPCheckerTransportError(t *testing.T) {
	t.Parallel()
	srv := newServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler) // the connection drops with no answer
	}))
	c := newChecker(t, &statusquery.HTTPChecker{})
	a := c.Check(context.Background(), statusquery.Query{Key: "k", Template: srv.URL + "/ops/{key}"})
	if a.Outcome != statusquery.NoAnswer || a.Detail != "transport error" || a.HTTPStatus != 0 || a.Err == nil {
		t.Errorf("Check = {%q %d %q err=%v}; want {no_answer 0 \"transport error\" err set}", a.Outcome, a.HTTPStatus, a.Detail, a.Err)
	}
}

func TestHTTPCheckerDoer(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		do     doerFunc
		want   statusquery.Outcome
		status int
		detail string
		err    error // nil: no error; errAny: any error
	}{
		{"error", func(*http.Request) (*http.Response, error) { return nil, boom },
			statusquery.NoAnswer, 0, "transport error", boom},
		{"nothing", func(*http.Request) (*http.Response, error) { return nil, nil },
			statusquery.NoAnswer, 0, "no response", errAny},
		{"nil body", func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 410}, nil },
			statusquery.NotFound, 410, "410 gone", nil},
		{"body read error", func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(io.MultiReader(strings.NewReader("[]"), errReader{boom}))}, nil
		}, statusquery.NoAnswer, 200, "transport error while reading body", boom},
	} {
		c := &statusquery.HTTPChecker{Doer: tc.do}
		a := c.Check(context.Background(), statusquery.Query{Key: "k", Template: "https://api.example.com/ops/{key}"})
		errOK := (tc.err == nil && a.Err == nil) || (tc.err == errAny && a.Err != nil) || (tc.err != errAny && tc.err != nil && errors.Is(a.Err, tc.err))
		if a.Outcome != tc.want || a.HTTPStatus != tc.status || a.Detail != tc.detail || !errOK {
			t.Errorf("%s: Check = {%q %d %q err=%v}; want {%q %d %q err=%v}", tc.name, a.Outcome, a.HTTPStatus, a.Detail, a.Err, tc.want, tc.status, tc.detail, tc.err)
		}
		c.CloseIdleConnections() // a Doer without the method: nothing to do
	}
}

var errAny = errors.New("any error")

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestHTTPCheckerUnusableTemplate(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	c := &statusquery.HTTPChecker{Doer: doerFunc(func(*http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, errors.New("must not be called")
	})}
	for _, tc := range []struct {
		q    statusquery.Query
		want error
	}{
		{statusquery.Query{Key: "k"}, statusquery.ErrInvalidTemplate},
		{statusquery.Query{Key: "k", Template: "ftp://h/{key}"}, statusquery.ErrInvalidTemplate},
		{statusquery.Query{Key: "", Template: "https://h/ops?k={key}"}, statusquery.ErrInvalidValue},
		{statusquery.Query{Key: "k", JobID: "..", Template: "https://h/jobs/{id}"}, statusquery.ErrInvalidValue},
	} {
		a := c.Check(context.Background(), tc.q)
		if a.Outcome != statusquery.NoAnswer || a.Detail != "unusable status URL template" || !errors.Is(a.Err, tc.want) {
			t.Errorf("Check(%+v) = {%q %q err=%v}; want {no_answer \"unusable status URL template\" err=%v}", tc.q, a.Outcome, a.Detail, a.Err, tc.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("Doer called %d times; want 0", n)
	}
}

func TestHTTPCheckerRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/ops/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved/"+r.URL.Path, http.StatusFound)
	})
	mux.HandleFunc("/moved/", func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		io.WriteString(w, `{"status":"succeeded"}`)
	})
	srv := newServer(t, mux)
	c := newChecker(t, &statusquery.HTTPChecker{})
	a := c.Check(context.Background(), statusquery.Query{Key: "k", Template: srv.URL + "/ops/{key}"})
	if a.Outcome != statusquery.NoAnswer || a.HTTPStatus != http.StatusFound || a.Detail != "302 found, redirect not followed" || a.Err != nil {
		t.Errorf("Check = {%q %d %q err=%v}; want {no_answer 302 \"302 found, redirect not followed\" err=nil}", a.Outcome, a.HTTPStatus, a.Detail, a.Err)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("redirect target hit %d times; want 0", n)
	}
}

// recordingServer answers 404 and hands the test each request it saw.
func recordingServer(t *testing.T) (*httptest.Server, <-chan *http.Request) {
	t.Helper()
	seen := make(chan *http.Request, 1)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Clone(context.Background())
		w.WriteHeader(http.StatusNotFound)
	}))
	return srv, seen
}

func TestHTTPCheckerAuthHeaders(t *testing.T) {
	t.Parallel()
	status, seen := recordingServer(t)
	other, _ := recordingServer(t)
	statusURL, _ := url.Parse(status.URL)
	jobHeader := http.Header{
		"Authorization":       {"Bearer job-token"},
		"Proxy-Authorization": {"Basic cHJveHk6cHc="},
		"Cookie":              {"session=abc"},
		"X-Api-Key":           {"key-123"},
		"X-Token":             {"tok"},
		"Idempotency-Key":     {"idem-1"},
		"Content-Type":        {"application/json"},
		"X-Request-Id":        {"req-9"},
	}
	auth := []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"}
	never := []string{"Idempotency-Key", "Content-Type", "X-Request-Id"}
	for _, tc := range []struct {
		name    string
		checker *statusquery.HTTPChecker
		jobURL  string
		header  http.Header
		want    []string // headers expected, with the job's values
		ua      string
	}{
		{"same origin", &statusquery.HTTPChecker{}, status.URL + "/v1/payments", jobHeader, auth, statusquery.DefaultUserAgent},
		{"same origin, scheme and path differ in case", &statusquery.HTTPChecker{}, "HTTP://" + statusURL.Host + "/OTHER?x=1", jobHeader, auth, statusquery.DefaultUserAgent},
		{"different port", &statusquery.HTTPChecker{}, other.URL + "/v1/payments", jobHeader, nil, statusquery.DefaultUserAgent},
		{"different scheme", &statusquery.HTTPChecker{}, "https://" + statusURL.Host + "/v1/payments", jobHeader, nil, statusquery.DefaultUserAgent},
		{"different host", &statusquery.HTTPChecker{}, "http://127.0.0.2:" + statusURL.Port() + "/v1/payments", jobHeader, nil, statusquery.DefaultUserAgent},
		{"no job URL", &statusquery.HTTPChecker{}, "", jobHeader, nil, statusquery.DefaultUserAgent},
		{"custom names", &statusquery.HTTPChecker{AuthHeaders: []string{"x-token"}, UserAgent: "app/1"}, status.URL, jobHeader, []string{"X-Token"}, "app/1"},
		{"none", &statusquery.HTTPChecker{AuthHeaders: []string{}}, status.URL, jobHeader, nil, statusquery.DefaultUserAgent},
		{"repeated name forwards once", &statusquery.HTTPChecker{AuthHeaders: []string{"Authorization", "Authorization"}}, status.URL, jobHeader, []string{"Authorization"}, statusquery.DefaultUserAgent},
		{"hand-built header map", &statusquery.HTTPChecker{}, status.URL, http.Header{"authorization": {"Bearer lower"}}, []string{"Authorization"}, statusquery.DefaultUserAgent},
	} {
		c := newChecker(t, tc.checker)
		a := c.Check(context.Background(), statusquery.Query{
			JobID: "j", Key: "k", JobMethod: http.MethodPost, JobURL: tc.jobURL, JobHeader: tc.header,
			Template: status.URL + "/v1/payments/{key}",
		})
		if a.Outcome != statusquery.NotFound {
			t.Errorf("%s: Check = {%q %q err=%v}; want not_found", tc.name, a.Outcome, a.Detail, a.Err)
			continue
		}
		r := <-seen
		for _, name := range append(append(auth, "X-Token"), never...) {
			got := r.Header.Values(name)
			var want []string
			for _, w := range tc.want {
				if w == name {
					want = tc.header.Values(name)
					if want == nil {
						want = tc.header[strings.ToLower(name)]
					}
				}
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s: server saw %s = %q; want %q", tc.name, name, got, want)
			}
		}
		if got := r.Header.Get("Accept"); got != "application/json" {
			t.Errorf("%s: server saw Accept = %q; want application/json", tc.name, got)
		}
		if got := r.Header.Get("User-Agent"); got != tc.ua {
			t.Errorf("%s: server saw User-Agent = %q; want %q", tc.name, got, tc.ua)
		}
		if r.Method != http.MethodGet || r.ContentLength > 0 {
			t.Errorf("%s: server saw %s with %d body bytes; want GET without body", tc.name, r.Method, r.ContentLength)
		}
	}
}

// TestHTTPCheckerKeyEscaping checks, at the server, that awkward keys and
// ids arrive intact in the path and in the query.
func TestHTTPCheckerKeyEscaping(t *testing.T) {
	t.Parallel()
	srv, seen := recordingServer(t)
	c := newChecker(t, &statusquery.HTTPChecker{})
	for _, key := range awkwardKeys() {
		id := "job " + key
		a := c.Check(context.Background(), statusquery.Query{
			JobID: id, Key: key, Template: srv.URL + "/ops/{key}/status?k={key}&id={id}",
		})
		if a.Outcome != statusquery.NotFound {
			t.Errorf("key %q: Check = {%q %q err=%v}; want not_found", key, a.Outcome, a.Detail, a.Err)
			continue
		}
		r := <-seen
		q := r.URL.Query()
		if r.URL.Path != "/ops/"+key+"/status" || q.Get("k") != key || q.Get("id") != id {
			t.Errorf("key %q: server saw path %q, k %q, id %q; want the key and id intact", key, r.URL.Path, q.Get("k"), q.Get("id"))
		}
		if want := "/ops/" + url.PathEscape(key) + "/status"; r.URL.EscapedPath() != want {
			t.Errorf("key %q: server saw escaped path %q; want %q (one segment)", key, r.URL.EscapedPath(), want)
		}
	}
}

// TestHTTPCheckerConcurrent shares one zero-value checker between
// goroutines; run with -race.
func TestHTTPCheckerConcurrent(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"status":"queued"}`)
	}))
	var c statusquery.HTTPChecker
	t.Cleanup(c.CloseIdleConnections)
	const n = 16
	var wg sync.WaitGroup
	outcomes := make(chan statusquery.Outcome, n)
	for i := range n {
		wg.Go(func() {
			outcomes <- c.Check(context.Background(), statusquery.Query{Key: "k" + strconv.Itoa(i), Template: srv.URL + "/ops/{key}"}).Outcome
		})
	}
	wg.Wait()
	close(outcomes)
	for o := range outcomes {
		if o != statusquery.InProgress {
			t.Errorf("Check outcome = %q; want in_progress", o)
		}
	}
	if got := hits.Load(); got != n {
		t.Errorf("server saw %d queries; want %d", got, n)
	}
}
