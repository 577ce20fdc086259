package statusquery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemrun/idemrun/statusquery"
)

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
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.ctype != "" {
				w.Header().Set("Content-Type", tc.ctype)
			}
			w.Write([]byte(tc.body))
		}))
		c := &statusquery.HTTPChecker{Timeout: 2 * time.Second}
		got := c.Check(context.Background(), statusquery.Query{JobID: "j", Key: "k", Template: srv.URL + "/s/{key}"})
		srv.Close()
		if got.Outcome != tc.want {
			t.Errorf("Content-Type %q: outcome %s (%s), want %s", tc.ctype, got.Outcome, got.Detail, tc.want)
		}
	}
}
