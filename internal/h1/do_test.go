package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var localPort = regexp.MustCompile(`127\.0\.0\.1:[0-9]+->`)

// TestDoAnswersAsClientDo: Do hands requests to the transport without
// http.Client; for every case here it returns what Client.Do (following no
// redirects) over such a transport returns: the answer of a redirect (not
// followed) and errors as *url.Error with the same message, for refused
// connections, timeouts and methods of any case.
func TestDoAnswersAsClientDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/moved":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		case "/redirect":
			// ?status=N&loc=L: an answer N with Location L.
			status, _ := strconv.Atoi(r.URL.Query().Get("status"))
			w.Header().Set("Location", r.URL.Query().Get("loc"))
			w.WriteHeader(status)
		case "/slow":
			<-r.Context().Done()
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "made")
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/x"
	ln.Close()

	d := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4})
	c := newTransport(t, Options{MaxConnsPerHost: 4, MaxIdlePerHost: 4}).client
	type answer struct {
		status   int
		body     string
		location string
		err      string
		urlErr   bool
	}
	type doer interface {
		Do(*http.Request) (*http.Response, error)
	}
	do := func(doer doer, method, target string, timeout time.Duration, noBody bool) answer {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		req.GetBody = nil // as BuildRequest makes them: never rewindable
		if noBody {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		resp, err := doer.Do(req)
		if err != nil {
			_, isURLErr := errors.AsType[*url.Error](err)
			// The local port differs from connection to connection.
			msg := localPort.ReplaceAllString(err.Error(), "127.0.0.1:PORT->")
			return answer{err: msg, urlErr: isURLErr}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, body: string(b), location: resp.Header.Get("Location")}
	}
	redirect := func(status int, loc string) string {
		return srv.URL + "/redirect?" + url.Values{"status": {strconv.Itoa(status)}, "loc": {loc}}.Encode()
	}
	const badLoc = "http://[::1%zz]/x" // does not parse as a URL
	for _, tc := range []struct {
		name, method, url string
		timeout           time.Duration
		noBody            bool
		wantErr           bool
	}{
		{"created", "POST", srv.URL + "/pay", 5 * time.Second, false, false},
		{"redirect returned", "POST", srv.URL + "/moved", 5 * time.Second, false, false},
		{"302 with a Location that does not parse", "POST", redirect(302, badLoc), 5 * time.Second, false, true},
		{"303 with a Location that does not parse, GET", "GET", redirect(303, badLoc), 5 * time.Second, true, true},
		{"307 with a body and a Location that does not parse", "POST", redirect(307, badLoc), 5 * time.Second, false, false},
		{"307 without a body and a Location that does not parse", "POST", redirect(307, badLoc), 5 * time.Second, true, true},
		{"308 with a Location that parses", "POST", redirect(308, "/there"), 5 * time.Second, true, false},
		{"300 with a Location that does not parse", "POST", redirect(300, badLoc), 5 * time.Second, false, false},
		{"https to a plain HTTP server", "POST", strings.Replace(srv.URL, "http://", "https://", 1) + "/pay", 5 * time.Second, false, true},
		{"connection refused", "POST", refused, 5 * time.Second, false, true},
		{"timeout", "PUT", srv.URL + "/slow", 50 * time.Millisecond, false, true},
		{"lower-case method", "post", refused, 5 * time.Second, false, true},
		{"mixed-case method", "PoSt", refused, 5 * time.Second, false, true},
		{"extension method", "PURGE", refused, 5 * time.Second, false, true},
	} {
		got, want := do(d, tc.method, tc.url, tc.timeout, tc.noBody), do(c, tc.method, tc.url, tc.timeout, tc.noBody)
		if got != want {
			t.Errorf("%s: direct %+v; Client.Do %+v", tc.name, got, want)
		}
		if tc.wantErr && (got.err == "" || !got.urlErr) {
			t.Errorf("%s: direct %+v; want a *url.Error", tc.name, got)
		}
		if !tc.wantErr && got.status == 0 {
			t.Errorf("%s: direct %+v; want an answer", tc.name, got)
		}
	}
}
