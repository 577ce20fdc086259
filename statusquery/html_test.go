package statusquery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemrun/idemrun/statusquery"
)

// checkAnswer asks an HTTPChecker about key "k" of a server that answers
// status with Content-Type ctype (net/http sniffs one when empty) and body.
func checkAnswer(t *testing.T, status int, ctype, body, template string) statusquery.Answer {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	c := &statusquery.HTTPChecker{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	return c.Check(context.Background(), statusquery.Query{JobID: "j", Key: "k", Template: srv.URL + template})
}

// TestHTMLCatchAllIsNoAnswer: a 200 HTML page (a login page or a web app's
// catch-all route) is not evidence that the operation was found.
func TestHTMLCatchAllIsNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		ctype string
		body  string
		want  statusquery.Outcome
	}{
		{"text/html; charset=utf-8", "<html><body>Welcome! Please sign in.</body></html>", statusquery.NoAnswer},
		{"application/xhtml+xml", "<html><body>Welcome! Please sign in.</body></html>", statusquery.NoAnswer},
		{"", "<!DOCTYPE html><html><body>catch-all</body></html>", statusquery.NoAnswer}, // sniffed as text/html
		{"application/json", `{"id":"pay_1"}`, statusquery.FoundSucceeded},
		{"", "ok", statusquery.FoundSucceeded}, // sniffed as text/plain
	} {
		got := checkAnswer(t, http.StatusOK, tc.ctype, tc.body, "/s/{key}")
		if got.Outcome != tc.want {
			t.Errorf("Content-Type %q: outcome %s (%s), want %s", tc.ctype, got.Outcome, got.Detail, tc.want)
		}
	}
}

// TestHTML404IsNoAnswer: a 404 or 410 HTML page comes from a web server or
// proxy (no route, upstream not deployed), not from a status API that
// looked the key up, so it allows no replay. A plain or JSON 404 still
// means not found.
func TestHTML404IsNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		status int
		ctype  string
		body   string
		want   statusquery.Outcome
	}{
		{404, "text/html", "<html><center><h1>404 Not Found</h1></center><hr><center>nginx</center></html>", statusquery.NoAnswer},
		{410, "text/html; charset=utf-8", "<html><body>Gone</body></html>", statusquery.NoAnswer},
		{404, "application/json", `{"error":"no such payment"}`, statusquery.NotFound},
		{404, "text/plain", "not found", statusquery.NotFound},
	} {
		got := checkAnswer(t, tc.status, tc.ctype, tc.body, "/s/{key}")
		if got.Outcome != tc.want {
			t.Errorf("%d %q: outcome %s (%s), want %s", tc.status, tc.ctype, got.Outcome, got.Detail, tc.want)
		}
	}
}

// TestAnswerForAnotherKeyIsNoAnswer: when the one operation a status
// answer holds names another idempotency key (a target that ignored the
// key filter), it says nothing about this job.
func TestAnswerForAnotherKeyIsNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		body string
		want statusquery.Outcome
	}{
		{`{"data":[{"id":"pay_7","idempotency_key":"someone-else","status":"failed"}]}`, statusquery.NoAnswer},
		{`{"id":"pay_7","idempotencyKey":"someone-else","status":"succeeded"}`, statusquery.NoAnswer},
		{`[{"id":"pay_7","idempotency_key":"someone-else","status":"processing"}]`, statusquery.NoAnswer},
		{`{"data":[{"id":"pay_7","idempotency_key":"k","status":"failed"}]}`, statusquery.FoundFailed},
		{`{"id":"pay_7","idempotency_key":"k"}`, statusquery.FoundSucceeded},
		{`{"id":"pay_7","key":"something-else"}`, statusquery.FoundSucceeded}, // "key" alone may mean anything
	} {
		got := checkAnswer(t, http.StatusOK, "application/json", tc.body, "/s?key={key}")
		if got.Outcome != tc.want {
			t.Errorf("%s: outcome %s (%s), want %s", tc.body, got.Outcome, got.Detail, tc.want)
		}
	}
}
