package statusquery

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// DefaultTimeout bounds one status query, answer body included.
	DefaultTimeout = 5 * time.Second
	// DefaultBodyLimit is how many bytes of an answer's body are kept.
	DefaultBodyLimit = 64 << 10
	// DefaultUserAgent is the User-Agent of status queries.
	DefaultUserAgent = "idemrun-statusquery"
	// maxDrain bounds how much of an over-long body is read and thrown away
	// so the connection can be reused; past it the connection is dropped.
	maxDrain = 64 << 10
	// maxHeaderBytes bounds the answer's header block.
	maxHeaderBytes = 64 << 10
)

// DefaultAuthHeaders returns the names of the job headers HTTPChecker
// forwards to a status URL of the job's own origin when AuthHeaders is nil:
// Authorization, Proxy-Authorization, Cookie and X-Api-Key.
func DefaultAuthHeaders() []string {
	return []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"}
}

// Doer sends an HTTP request; *http.Client implements it.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// HTTPChecker is the default Checker: it sends GET on the job's expanded
// status URL and reads the answer with Interpret. The zero value is ready to
// use and safe for concurrent use; an HTTPChecker must not be copied after
// first use.
type HTTPChecker struct {
	// Doer sends the query. It should not follow redirects: a 3xx is read
	// as NoAnswer. Defaults to an *http.Client of the checker's own, with
	// its own transport, that never follows redirects.
	Doer Doer
	// Timeout bounds each query, reading the body included. Zero or
	// negative means DefaultTimeout (5s).
	Timeout time.Duration
	// BodyLimit is how many body bytes are kept; a longer body is
	// Truncated. Zero or negative means DefaultBodyLimit (64 KiB).
	BodyLimit int64
	// AuthHeaders names the job headers forwarded to a status URL with the
	// same scheme, host and port as the job URL (default ports 80 and 443
	// normalized, host compared case-insensitively); no job header is ever
	// sent to another origin, and no other job header is sent at all. Nil
	// means DefaultAuthHeaders(); an empty non-nil slice forwards nothing.
	AuthHeaders []string
	// UserAgent is sent as User-Agent. Empty means DefaultUserAgent
	// ("idemrun-statusquery").
	UserAgent string
	// DialControl, when set, is called for every connection the default
	// Doer dials, with the address DNS resolved to (net.Dialer.Control);
	// an error refuses the connection. The runner's host allowlist uses it
	// to refuse link-local and metadata addresses however a name resolves.
	// Nil means none.
	DialControl func(network, address string, c syscall.RawConn) error
	// TLSConfig, when set, is the TLS configuration the default Doer uses
	// for https status URLs (a private CA's RootCAs, a client certificate);
	// it is read and cloned at the first query, and MinVersion is raised
	// to TLS 1.2 if lower. Ignored when Doer is set.
	TLSConfig *tls.Config

	once   sync.Once
	client *http.Client // the default Doer, built on first use
}

// Check expands q.Template, sends GET with "Accept: application/json", reads
// at most BodyLimit bytes of the answer and interprets it (see Interpret).
// An unusable template, a transport error, a timeout or a body read error
// gives NoAnswer with Err set; the template errors match
// ErrInvalidTemplate or ErrInvalidValue, and no request is sent then.
func (c *HTTPChecker) Check(ctx context.Context, q Query) Answer {
	statusURL, err := Expand(q.Template, q.Key, q.JobID)
	if err != nil {
		return Answer{Outcome: NoAnswer, Detail: "unusable status URL template", Err: err}
	}
	timeout := c.timeout()
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(qctx, http.MethodGet, statusURL, nil)
	if err != nil {
		return Answer{Outcome: NoAnswer, Detail: "unusable status URL template",
			Err: fmt.Errorf("statusquery: build status request: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent())
	if sameOrigin(req.URL, q.JobURL) {
		copyHeaders(req.Header, q.JobHeader, c.authHeaders())
	}

	resp, err := c.doer().Do(req)
	if err != nil {
		return failure(ctx, qctx, timeout, "send status query", err)
	}
	if resp == nil {
		return Answer{Outcome: NoAnswer, Detail: "no response",
			Err: errors.New("statusquery: send status query: doer returned neither response nor error")}
	}
	body := resp.Body
	if body == nil {
		body = http.NoBody
	}
	defer body.Close()

	data, truncated, err := readCapped(body, c.bodyLimit())
	if err != nil {
		a := failure(ctx, qctx, timeout, "read status answer", err)
		a.HTTPStatus = resp.StatusCode
		a.Detail += " while reading body"
		return a
	}
	// Drain a bounded remainder so a keep-alive connection can be reused;
	// a longer or stalled remainder just costs the connection.
	_, _ = io.CopyN(io.Discard, body, maxDrain)

	outcome, detail := Interpret(resp.StatusCode, data, truncated)
	if outcome == NotFound && isHTML(resp.Header.Get("Content-Type")) {
		// A 404/410 HTML page comes from a web server or proxy (no route,
		// encoded slash refused, upstream not deployed), not from a status
		// API that looked the key up. Replaying on it could duplicate.
		outcome, detail = NoAnswer, fmt.Sprintf("%d with an HTML page, not a status answer", resp.StatusCode)
	}
	if (outcome == FoundSucceeded || outcome == FoundFailed || outcome == InProgress) && otherKey(data, q.Key) {
		outcome, detail = NoAnswer, "the operation found names another idempotency key"
	}
	if outcome == FoundSucceeded && isHTML(resp.Header.Get("Content-Type")) {
		// A 2xx HTML page is a login page or a web app's catch-all route,
		// not a status API saying it found the operation. Counting it as
		// found would end the job succeeded on no evidence.
		outcome, detail = NoAnswer, fmt.Sprintf("%d with an HTML page, not a status answer", resp.StatusCode)
	}
	return Answer{
		Outcome:    outcome,
		HTTPStatus: resp.StatusCode,
		Body:       data,
		Truncated:  truncated,
		Detail:     detail,
	}
}

// CloseIdleConnections closes idle connections of the default Doer, or of
// Doer when it has a CloseIdleConnections method.
func (c *HTTPChecker) CloseIdleConnections() {
	if c.Doer != nil {
		if d, ok := c.Doer.(interface{ CloseIdleConnections() }); ok {
			d.CloseIdleConnections()
		}
		return
	}
	c.doer().(*http.Client).CloseIdleConnections()
}

func (c *HTTPChecker) doer() Doer {
	if c.Doer != nil {
		return c.Doer
	}
	c.once.Do(func() { c.client = newDefaultClient(c.DialControl, c.TLSConfig) })
	return c.client
}

func (c *HTTPChecker) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c *HTTPChecker) bodyLimit() int64 {
	if c.BodyLimit <= 0 {
		return DefaultBodyLimit
	}
	return c.BodyLimit
}

func (c *HTTPChecker) authHeaders() []string {
	if c.AuthHeaders == nil {
		return DefaultAuthHeaders()
	}
	return c.AuthHeaders
}

func (c *HTTPChecker) userAgent() string {
	if c.UserAgent == "" {
		return DefaultUserAgent
	}
	return c.UserAgent
}

// newDefaultClient builds a client with its own transport (so nothing else
// in the process shares or reconfigures it) that never follows redirects:
// a redirected status query is NoAnswer, and following it could carry
// the job's credentials elsewhere.
func newDefaultClient(control func(network, address string, c syscall.RawConn) error, tlsBase *tls.Config) *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: control}
	var tlsConfig *tls.Config
	if tlsBase != nil {
		tlsConfig = tlsBase.Clone()
		tlsConfig.MinVersion = max(tlsConfig.MinVersion, tls.VersionTLS12)
	}
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:        tlsConfig,
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           32,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: maxHeaderBytes,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// failure turns an error of the query into a NoAnswer, telling a caller's
// cancellation apart from the checker's own timeout.
func failure(parent, qctx context.Context, timeout time.Duration, stage string, err error) Answer {
	var detail string
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		detail = "canceled"
	case parent.Err() != nil:
		detail = "caller deadline exceeded"
	case errors.Is(qctx.Err(), context.DeadlineExceeded):
		detail = "timeout after " + timeout.String()
	default:
		detail = "transport error"
	}
	return Answer{Outcome: NoAnswer, Detail: detail, Err: fmt.Errorf("statusquery: %s: %w", stage, err)}
}

// readCapped reads at most limit bytes of r, and one more to learn whether
// the body was longer.
func readCapped(r io.Reader, limit int64) ([]byte, bool, error) {
	n := limit
	if n < math.MaxInt64 {
		n++
	}
	data, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return data[:limit:limit], true, nil
	}
	return data, false, nil
}

// sameOrigin reports whether the status URL and the job URL share scheme,
// host and port. Default ports are made explicit, hosts compare under ASCII
// case folding only, and an unparsable job URL is never the same origin.
func sameOrigin(status *url.URL, jobURL string) bool {
	job, err := url.Parse(jobURL)
	if err != nil || status == nil || status.Host == "" || job.Host == "" {
		return false
	}
	scheme := strings.ToLower(status.Scheme)
	if scheme != strings.ToLower(job.Scheme) || (scheme != "http" && scheme != "https") {
		return false
	}
	if !asciiEqualFold(status.Hostname(), job.Hostname()) {
		return false
	}
	p1, ok1 := effectivePort(status, scheme)
	p2, ok2 := effectivePort(job, scheme)
	return ok1 && ok2 && p1 == p2
}

func effectivePort(u *url.URL, scheme string) (int, bool) {
	p := u.Port()
	if p == "" {
		if scheme == "https" {
			return 443, true
		}
		return 80, true
	}
	n, err := strconv.Atoi(p)
	return n, err == nil && n > 0 && n <= 65535
}

// copyHeaders copies into dst the src headers whose names are in names,
// matching names case-insensitively so a header map built by hand with
// non-canonical keys still works. Keys are visited in order so the result
// is the same every run.
func copyHeaders(dst, src http.Header, names []string) {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		if !slices.ContainsFunc(names, func(n string) bool { return asciiEqualFold(n, k) }) {
			continue
		}
		for _, v := range src[k] {
			dst.Add(k, v)
		}
	}
}

// isHTML reports whether a Content-Type names an HTML document.
func isHTML(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// otherKey reports whether the single operation of a status answer (an
// object, or the one item of a list) carries an idempotency key field that
// is not key.
func otherKey(body []byte, key string) bool {
	b := trimJSONSpace(bytes.TrimPrefix(body, []byte(utf8BOM)))
	var v any
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	if m, ok := v.(map[string]any); ok {
		if d, ok := m["data"].([]any); ok {
			v = d
		}
	}
	if l, ok := v.([]any); ok {
		if len(l) != 1 {
			return false
		}
		v = l[0]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, f := range []string{"idempotency_key", "idempotencyKey"} {
		if s, ok := m[f].(string); ok && s != key {
			return true
		}
	}
	return false
}
