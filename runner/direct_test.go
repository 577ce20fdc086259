package runner

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var localPort = regexp.MustCompile(`127\.0\.0\.1:[0-9]+->`)

// TestDirectDoerAnswersAsClientDo: the runner's default Doer hands requests
// to its transport without http.Client; for every case here it returns what
// Client.Do over the same transport returns: the answer of a redirect (not
// followed) and errors as *url.Error with the same message, for refused
// connections, timeouts and methods of any case.
func TestDirectDoerAnswersAsClientDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/moved":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
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

	d := newHTTPClient(4, 4).(directDoer)
	c := clientWith(newTransport(4, 4))
	type answer struct {
		status   int
		body     string
		location string
		err      string
		urlErr   bool
	}
	do := func(doer Doer, method, target string, timeout time.Duration) answer {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
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
	for _, tc := range []struct {
		name, method, url string
		timeout           time.Duration
		wantErr           bool
	}{
		{"created", "POST", srv.URL + "/pay", 5 * time.Second, false},
		{"redirect returned", "POST", srv.URL + "/moved", 5 * time.Second, false},
		{"connection refused", "POST", refused, 5 * time.Second, true},
		{"timeout", "PUT", srv.URL + "/slow", 50 * time.Millisecond, true},
		{"lower-case method", "post", refused, 5 * time.Second, true},
		{"mixed-case method", "PoSt", refused, 5 * time.Second, true},
		{"extension method", "PURGE", refused, 5 * time.Second, true},
	} {
		got, want := do(d, tc.method, tc.url, tc.timeout), do(c, tc.method, tc.url, tc.timeout)
		if got != want {
			t.Errorf("%s: direct %+v; Client.Do %+v", tc.name, got, want)
		}
		if tc.wantErr && (got.err == "" || !got.urlErr) {
			t.Errorf("%s: direct %+v; want a *url.Error", tc.name, got)
		}
	}
}
