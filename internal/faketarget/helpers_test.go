package faketarget

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/idemkey"
)

// testTimeout bounds every wait and request in a test. It is far above what
// any of them takes, so that a loaded machine slows the tests down without
// failing them.
const testTimeout = 60 * time.Second

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newClient returns a client that opens a fresh connection per request, so
// net/http never resends a request on its own (it does so only on reused
// connections).
func newClient(t *testing.T, timeout time.Duration) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	code   int
	header http.Header
	body   []byte
	err    error
}

// post sends POST /payments with key in the header (none when key is "").
func post(c *http.Client, base, key, body string) result {
	req, err := http.NewRequest(http.MethodPost, base+paymentsPath, strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(idemkey.HeaderName, key)
	}
	return do(c, req)
}

func get(c *http.Client, url string) result {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return result{err: err}
	}
	return do(c, req)
}

func do(c *http.Client, req *http.Request) result {
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{code: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func decodePayment(t *testing.T, b []byte) Payment {
	t.Helper()
	var p Payment
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("decode payment %q: %v", b, err)
	}
	return p
}

// statusAnswer is the union of the status endpoint's JSON answers.
type statusAnswer struct {
	ID     string    `json:"id"`
	Key    string    `json:"key"`
	Status string    `json:"status"`
	Data   []Payment `json:"data"`
	Error  string    `json:"error"`
}

func decodeStatus(t *testing.T, b []byte) statusAnswer {
	t.Helper()
	var a statusAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("decode status answer %q: %v", b, err)
	}
	return a
}

func statusURL(s *Server, key string) string {
	return strings.Replace(s.StatusTemplate(), "{key}", url.PathEscape(key), 1)
}
