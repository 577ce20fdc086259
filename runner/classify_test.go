package runner

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/h1"
	"github.com/idemrun/idemrun/internal/loopback"
)

func TestClassifyResponseDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status     int
		want       Class
		wantHonor  bool
		wantReason string
	}{
		{200, ClassSucceeded, false, "200 from target"},
		{201, ClassSucceeded, false, "201"},
		{204, ClassSucceeded, false, "204"},
		{299, ClassSucceeded, false, "299"},
		{301, ClassPermanent, false, "redirect not followed (301)"},
		{302, ClassPermanent, false, "redirect not followed (302)"},
		{304, ClassPermanent, false, "redirect not followed (304)"},
		{307, ClassPermanent, false, "redirect not followed (307)"},
		{308, ClassPermanent, false, "redirect not followed (308)"},
		{400, ClassPermanent, false, "400 from target: rejected"},
		{401, ClassPermanent, false, "401"},
		{403, ClassPermanent, false, "403"},
		{404, ClassPermanent, false, "404"},
		{405, ClassPermanent, false, "405"},
		{408, ClassNoEffect, true, "408 from target: not processed"},
		{409, ClassInProgress, true, "409 from target: a request with this key is still in progress"},
		{410, ClassPermanent, false, "410"},
		{413, ClassPermanent, false, "413"},
		{415, ClassPermanent, false, "415"},
		{422, ClassKeyMismatch, false, "422 from target: idempotency key reused"},
		{425, ClassNoEffect, true, "425"},
		{429, ClassNoEffect, true, "429"},
		{499, ClassPermanent, false, "499"},
		{500, ClassUnknown, false, "500 from target: may have been processed"},
		{501, ClassUnknown, false, "501"},
		{502, ClassUnknown, false, "502"},
		{503, ClassUnknown, true, "503 from target: may have been processed"},
		{504, ClassUnknown, false, "504"},
		{505, ClassUnknown, false, "505"},
		{599, ClassUnknown, false, "599"},
		{100, ClassUnknown, false, "unexpected status 100"},
		{199, ClassUnknown, false, "unexpected status 199"},
		{0, ClassUnknown, false, "unexpected status 0"},
		{-1, ClassUnknown, false, "unexpected status -1"},
		{600, ClassUnknown, false, "unexpected status 600"},
	}
	for _, tt := range tests {
		got := ClassifyResponse(tt.status, ClassifyRules{})
		if got.Class != tt.want || got.RetryAfterHonored != tt.wantHonor || !strings.Contains(got.Reason, tt.wantReason) {
			t.Errorf("ClassifyResponse(%d) = %+v, want class %q, RetryAfterHonored %v, reason containing %q",
				tt.status, got, tt.want, tt.wantHonor, tt.wantReason)
		}
	}
}

func TestClassifyResponseRules(t *testing.T) {
	t.Parallel()
	only503 := ClassifyRules{NoEffectStatuses: []int{503}}
	replaySafe := ClassifyRules{ReplaySafe: true}
	tests := []struct {
		name      string
		status    int
		rules     ClassifyRules
		want      Class
		wantHonor bool
	}{
		{"503 listed", 503, only503, ClassNoEffect, true},
		{"500 not listed", 500, only503, ClassUnknown, false},
		{"502 not listed", 502, only503, ClassUnknown, false},
		{"404 listed", 404, ClassifyRules{NoEffectStatuses: []int{404}}, ClassNoEffect, true},
		{"2xx listed stays succeeded", 200, ClassifyRules{NoEffectStatuses: []int{200}}, ClassSucceeded, false},
		{"replay-safe 500", 500, replaySafe, ClassNoEffect, true},
		{"replay-safe 504", 504, replaySafe, ClassNoEffect, true},
		{"replay-safe 100", 100, replaySafe, ClassNoEffect, true},
		{"replay-safe 404 stays permanent", 404, replaySafe, ClassPermanent, false},
		{"replay-safe 302 stays permanent", 302, replaySafe, ClassPermanent, false},
		{"replay-safe 422 stays key mismatch", 422, replaySafe, ClassKeyMismatch, false},
		{"replay-safe 409 stays in progress", 409, replaySafe, ClassInProgress, true},
		{"replay-safe 201 succeeded", 201, replaySafe, ClassSucceeded, false},
	}
	for _, tt := range tests {
		got := ClassifyResponse(tt.status, tt.rules)
		if got.Class != tt.want || got.RetryAfterHonored != tt.wantHonor || got.Reason == "" {
			t.Errorf("%s: ClassifyResponse(%d, %+v) = %+v, want class %q, RetryAfterHonored %v, a reason",
				tt.name, tt.status, tt.rules, got, tt.want, tt.wantHonor)
		}
	}
}

func FuzzClassifyResponse(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzClassifyResponse.
	f.Fuzz(func(t *testing.T, status, listed int, replaySafe bool) {
		rules := ClassifyRules{NoEffectStatuses: []int{listed}, ReplaySafe: replaySafe}
		got := ClassifyResponse(status, rules)
		if !classifyTestKnown(got.Class) || got.Reason == "" {
			t.Fatalf("ClassifyResponse(%d, %+v) = %+v, want a defined class and a reason", status, rules, got)
		}
		is2xx := status >= 200 && status <= 299
		if is2xx != (got.Class == ClassSucceeded) {
			t.Fatalf("ClassifyResponse(%d, %+v) = %q, want succeeded exactly for 2xx", status, rules, got.Class)
		}
		if !is2xx && status == listed && got.Class != ClassNoEffect {
			t.Fatalf("ClassifyResponse(%d, %+v) = %q, want no_effect for a listed status", status, rules, got.Class)
		}
		if replaySafe && got.Class == ClassUnknown {
			t.Fatalf("ClassifyResponse(%d, %+v) = unknown, want never unknown when replay-safe", status, rules)
		}
		if base := ClassifyResponse(status, ClassifyRules{}); base.Class != ClassUnknown && base.Class != got.Class && status != listed {
			t.Fatalf("ClassifyResponse(%d): rules %+v changed %q to %q, want only unknown to change", status, rules, base.Class, got.Class)
		}
	})
}

// classifyTestKnown reports whether c is one of the declared classes.
func classifyTestKnown(c Class) bool {
	switch c {
	case ClassSucceeded, ClassNoEffect, ClassPermanent, ClassUnknown, ClassInProgress, ClassKeyMismatch:
		return true
	}
	return false
}

func TestClassifyError(t *testing.T) {
	t.Parallel()
	var (
		classifyNothing  = Progress{}
		classifyReused   = Progress{GotConn: true, Reused: true}
		classifyConn     = Progress{GotConn: true}
		classifyHeaders  = Progress{GotConn: true, WroteHeaders: true}
		classifyWritten  = Progress{GotConn: true, WroteHeaders: true, WroteRequest: true}
		classifyAnswered = Progress{GotConn: true, WroteHeaders: true, WroteRequest: true, GotFirstByte: true}
	)
	cert := &x509.Certificate{}
	dnsErr := &url.Error{Op: "Post", URL: "http://nope.invalid/", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true},
	}}
	dialTimeout := &url.Error{Op: "Post", URL: "http://192.0.2.1/", Err: &net.OpError{
		Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80}, Err: os.ErrDeadlineExceeded,
	}}
	reset := &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: &net.OpError{
		Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET),
	}}
	brokenPipe := &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: &net.OpError{
		Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE),
	}}
	post := func(err error) error { return &url.Error{Op: "Post", URL: "http://127.0.0.1/pay", Err: err} }
	verifyErr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	safe := ClassifyRules{ReplaySafe: true}

	tests := []struct {
		name         string
		err          error
		p            Progress
		shuttingDown bool
		rules        ClassifyRules
		want         Class
		wantReason   string
	}{
		// ARCHITECTURE.md §3: DNS failure, connection refused, dial timeout, TLS
		// handshake failure, proxy CONNECT failure → no effect.
		{"dns failure", dnsErr, classifyNothing, false, ClassifyRules{}, ClassNoEffect, "dns lookup failed"},
		{"dns failure bare", &net.DNSError{Err: "server misbehaving", Name: "x.invalid", IsTemporary: true}, classifyNothing, false, ClassifyRules{}, ClassNoEffect, "dns lookup failed"},
		{"connection refused", post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "connection refused"},
		{"dial timeout", dialTimeout, classifyNothing, false, ClassifyRules{}, ClassNoEffect, "dial timeout"},
		{"dial other", post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "dial failed"},
		{"tls record header", post(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "tls handshake failed"},
		{"tls alert", post(tls.AlertError(40)), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "tls handshake failed"},
		{"tls alert pointer", post(new(tls.AlertError)), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "tls handshake failed"},
		{"tls handshake timeout", post(errors.New("net/http: TLS handshake timeout")), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "tls handshake failed"},
		{"proxy connect", post(&net.OpError{Op: "proxyconnect", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "connection refused"},
		{"proxy connect other", post(&net.OpError{Op: "proxyconnect", Net: "tcp", Err: io.EOF}), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "proxy connect failed"},

		// Certificate verification, bad URL/scheme, invalid header → permanent,
		// even though they happen before WroteHeaders.
		{"certificate verification", post(verifyErr), classifyNothing, false, ClassifyRules{}, ClassPermanent, "certificate verification failed"},
		{"unknown authority", post(x509.UnknownAuthorityError{}), classifyNothing, false, ClassifyRules{}, ClassPermanent, "certificate verification failed"},
		{"hostname", post(x509.HostnameError{Certificate: cert, Host: "example.com"}), classifyNothing, false, ClassifyRules{}, ClassPermanent, "certificate verification failed"},
		{"certificate invalid", post(x509.CertificateInvalidError{Cert: cert, Reason: x509.Expired}), classifyNothing, false, ClassifyRules{}, ClassPermanent, "certificate verification failed"},
		{"certificate error replay-safe", post(verifyErr), classifyNothing, false, safe, ClassPermanent, "certificate verification failed"},
		{"bad url", &url.Error{Op: "parse", URL: "http://[::1", Err: errors.New("missing ']' in host")}, classifyNothing, false, ClassifyRules{}, ClassPermanent, "bad URL"},
		{"bad escape", post(url.EscapeError("%zz")), classifyNothing, false, ClassifyRules{}, ClassPermanent, "bad URL"},
		{"unsupported scheme", post(errors.New(`unsupported protocol scheme "ftp"`)), classifyNothing, false, ClassifyRules{}, ClassPermanent, "unsupported protocol scheme"},
		{"invalid header", post(errors.New(`net/http: invalid header field name "Bad Name"`)), classifyNothing, false, ClassifyRules{}, ClassPermanent, "invalid header field"},
		{"invalid header h2", post(errors.New(`invalid HTTP header name "Bad Name"`)), classifyNothing, false, ClassifyRules{}, ClassPermanent, "invalid HTTP header"},
		{"invalid method", post(errors.New(`net/http: invalid method "BAD METHOD"`)), classifyNothing, false, ClassifyRules{}, ClassPermanent, "invalid method"},

		// Failure before WroteHeaders on a reused connection → no effect.
		{"reused conn EOF", post(io.EOF), classifyReused, false, ClassifyRules{}, ClassNoEffect, "reused connection failed before sending"},
		{"reused conn broken pipe", brokenPipe, classifyReused, false, ClassifyRules{}, ClassNoEffect, "reused connection failed before sending"},
		{"reused conn reset", reset, classifyReused, false, ClassifyRules{}, ClassNoEffect, "reused connection failed before sending"},
		{"fresh conn EOF", post(io.EOF), classifyConn, false, ClassifyRules{}, ClassNoEffect, "connection failed before sending"},
		{"server closed idle", post(errors.New("http: server closed idle connection")), classifyReused, false, ClassifyRules{}, ClassNoEffect, "before sending"},
		{"deadline before a connection", post(context.DeadlineExceeded), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "timed out before sending"},
		{"shutdown before a connection", post(context.Canceled), classifyNothing, true, ClassifyRules{}, ClassNoEffect, "canceled by shutdown before sending"},
		{"canceled before a connection", post(context.Canceled), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "request not sent"},
		{"client timeout before a connection", post(os.ErrDeadlineExceeded), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "timed out before sending"},

		// A cancellation or timeout with a connection in hand but no
		// WroteHeaders yet: HTTP/2 may have flushed HEADERS already → unknown.
		{"deadline with a connection", post(context.DeadlineExceeded), classifyConn, false, ClassifyRules{}, ClassUnknown, "timed out with a connection in hand"},
		{"shutdown with a reused connection", post(context.Canceled), classifyReused, true, ClassifyRules{}, ClassUnknown, "canceled by shutdown with a connection in hand"},
		{"request canceled with a connection", post(errors.New("net/http: request canceled")), classifyConn, false, ClassifyRules{}, ClassUnknown, "canceled with a connection in hand"},
		{"replay-safe deadline with a connection", post(context.DeadlineExceeded), classifyConn, false, safe, ClassNoEffect, "replay-safe"},
		{"proxy refused CONNECT", post(errors.New("Forbidden")), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "request not sent"},

		// Reset/EOF/timeout after headers were written, per-attempt
		// timeout after sending, ResponseHeaderTimeout → unknown.
		{"reset after sending", reset, classifyWritten, false, ClassifyRules{}, ClassUnknown, "connection reset after sending"},
		{"EOF after sending", post(io.EOF), classifyWritten, false, ClassifyRules{}, ClassUnknown, "connection closed (EOF) after sending"},
		{"unexpected EOF after sending", post(io.ErrUnexpectedEOF), classifyWritten, false, ClassifyRules{}, ClassUnknown, "EOF"},
		{"EOF while sending body", post(io.EOF), classifyHeaders, false, ClassifyRules{}, ClassUnknown, "connection closed (EOF) while sending the body"},
		{"broken pipe while sending body", brokenPipe, classifyHeaders, false, ClassifyRules{}, ClassUnknown, "transport error while sending the body"},
		{"deadline after sending", post(context.DeadlineExceeded), classifyWritten, false, ClassifyRules{}, ClassUnknown, "timed out after sending"},
		{"deadline after headers", post(context.DeadlineExceeded), classifyHeaders, false, ClassifyRules{}, ClassUnknown, "timed out while sending the body"},
		{"read timeout after sending", post(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), classifyWritten, false, ClassifyRules{}, ClassUnknown, "timed out after sending"},
		{"response header timeout", post(errors.New("net/http: timeout awaiting response headers")), classifyWritten, false, ClassifyRules{}, ClassUnknown, "ResponseHeaderTimeout"},
		{"malformed response", post(errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "x"`)), classifyAnswered, false, ClassifyRules{}, ClassUnknown, "transport error after sending"},
		{"tls alert after sending", post(tls.AlertError(42)), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},

		// Errors that normally come before sending, with progress that says
		// headers went out (the transport retried internally) → unknown.
		{"refused after headers", post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},
		{"dns after headers", dnsErr, classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},
		{"certificate after headers", post(verifyErr), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},

		// HTTP/2 REFUSED_STREAM, GOAWAY above our stream id → no effect.
		{"refused stream", post(errors.New("stream error: stream ID 3; REFUSED_STREAM")), classifyWritten, false, ClassifyRules{}, ClassNoEffect, "REFUSED_STREAM"},
		{"refused stream with cause", post(errors.New("stream error: stream ID 5; REFUSED_STREAM; too busy")), classifyWritten, false, ClassifyRules{}, ClassNoEffect, "REFUSED_STREAM"},
		{"refused stream cannot retry", post(errors.New("http2: Transport: cannot retry err [stream error: stream ID 1; REFUSED_STREAM] after Request.Body was written; define Request.GetBody to avoid this error")), classifyWritten, false, ClassifyRules{}, ClassNoEffect, "REFUSED_STREAM"},
		{"other stream error", post(errors.New("stream error: stream ID 3; INTERNAL_ERROR")), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},
		{"REFUSED_STREAM quoted from a response", post(errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "REFUSED_STREAM"`)), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},
		{"refused stream before headers", post(errors.New("stream error: stream ID 3; REFUSED_STREAM")), classifyNothing, false, ClassifyRules{}, ClassNoEffect, "not sent"},
		{"goaway graceful", post(errors.New("http2: Transport received Server's graceful shutdown GOAWAY")), classifyWritten, false, ClassifyRules{}, ClassNoEffect, "GOAWAY before our stream"},
		{"goaway first stream", post(errors.New("http2: Transport received GOAWAY from server ErrCode:PROTOCOL_ERROR")), classifyWritten, false, ClassifyRules{}, ClassNoEffect, "GOAWAY before our stream"},
		{"refused-stream phrase quoted from a header line", post(errors.New(`malformed MIME header line: "X-Upstream-Error (h2): stream error: stream ID 1; REFUSED_STREAM"`)), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},
		{"goaway phrase quoted from a header line", post(errors.New(`malformed MIME header line: "X-E: http2: Transport received GOAWAY from server"`)), classifyWritten, false, ClassifyRules{}, ClassUnknown, "after sending"},
		{"goaway phrase in the server's debug data", post(errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=5, ErrCode=NO_ERROR, debug="http2: Transport received Server's graceful shutdown GOAWAY"`)), classifyWritten, false, ClassifyRules{}, ClassUnknown, "GOAWAY, our stream may have been received"},
		{"goaway stream id unknown", post(errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=5, ErrCode=NO_ERROR, debug=""`)), classifyWritten, false, ClassifyRules{}, ClassUnknown, "GOAWAY, our stream may have been received"},
		{"phrase only in URL", &url.Error{Op: "Post", URL: "http://127.0.0.1/?q=REFUSED_STREAM+invalid+header+field", Err: io.EOF}, classifyWritten, false, ClassifyRules{}, ClassUnknown, "EOF"},

		// Context canceled by shutdown after sending → unknown.
		{"shutdown after sending", post(context.Canceled), classifyWritten, true, ClassifyRules{}, ClassUnknown, "canceled by shutdown after sending"},
		{"canceled after sending", post(context.Canceled), classifyWritten, false, ClassifyRules{}, ClassUnknown, "canceled after sending"},

		// ReplaySafe turns unknown into no effect, and nothing else.
		{"replay-safe EOF after sending", post(io.EOF), classifyWritten, false, safe, ClassNoEffect, "replay-safe"},
		{"replay-safe deadline after sending", post(context.DeadlineExceeded), classifyWritten, false, safe, ClassNoEffect, "timed out after sending"},
		{"replay-safe shutdown after sending", post(context.Canceled), classifyWritten, true, safe, ClassNoEffect, "replay-safe"},
		{"replay-safe bad scheme", post(errors.New(`unsupported protocol scheme "ftp"`)), classifyNothing, false, safe, ClassPermanent, "unsupported protocol scheme"},
		{"replay-safe refused", post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), classifyNothing, false, safe, ClassNoEffect, "connection refused"},
		{"no effect statuses do not apply", post(io.EOF), classifyWritten, false, ClassifyRules{NoEffectStatuses: []int{503}}, ClassUnknown, "EOF"},

		{"nil error", nil, classifyWritten, false, ClassifyRules{}, ClassUnknown, "no response and no error"},
		{"nil error replay-safe", nil, classifyWritten, false, safe, ClassNoEffect, "no response and no error"},
	}
	for _, tt := range tests {
		got := ClassifyError(tt.err, tt.p, tt.shuttingDown, tt.rules)
		if got.Class != tt.want || !strings.Contains(got.Reason, tt.wantReason) || got.RetryAfterHonored {
			t.Errorf("%s: ClassifyError(%v, %+v, %v, %+v) = %+v, want class %q, reason containing %q, RetryAfterHonored false",
				tt.name, tt.err, tt.p, tt.shuttingDown, tt.rules, got, tt.want, tt.wantReason)
		}
	}
}

// roundTripCloser is a transport the classification tests can run:
// net/http's or the runner's own.
type roundTripCloser interface {
	http.RoundTripper
	CloseIdleConnections()
}

// classifyTestDo sends req with tr and records the httptrace progress the
// way the sender does. The callbacks may run on transport goroutines, even
// after Do returns (HTTP/2), hence the mutex.
func classifyTestDo(t *testing.T, tr roundTripCloser, req *http.Request) (Progress, error) {
	t.Helper()
	var (
		mu sync.Mutex
		p  Progress
	)
	set := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
	}
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			set(func() { p.GotConn, p.Reused = true, info.Reused })
		},
		WroteHeaders: func() { set(func() { p.WroteHeaders = true }) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			set(func() { p.WroteRequest = info.Err == nil })
		},
		GotFirstResponseByte: func() { set(func() { p.GotFirstByte = true }) },
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	// Bounded: a case that reaches a server it did not mean to must fail,
	// not hang the package.
	ctx, cancel := context.WithTimeout(req.Context(), 20*time.Second)
	defer cancel()
	resp, err := client.Do(req.WithContext(ctx))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("%s %s: got status %d, want a transport error", req.Method, req.URL, resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	return p, err
}

// classifyTestRequest builds a POST with an idempotency key, as the runner
// sends.
func classifyTestRequest(t *testing.T, ctx context.Context, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{"amount":1}`))
	if err != nil {
		t.Fatalf("http.NewRequest(%q): %v", target, err)
	}
	req.Header.Set("Idempotency-Key", "k-1")
	req.Header.Set("Content-Type", "application/json")
	return req
}

// classifyTestBlockingServer answers nothing until the test ends; received
// gets one value per request the handler saw in full.
func classifyTestBlockingServer(t *testing.T) (srv *httptest.Server, received <-chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	got := make(chan struct{}, 16)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- struct{}{}
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, got
}

// TestClassifyErrorRealTransport produces each transport failure for real,
// through net/http's Transport and through the runner's own, and checks
// that both classify alike.
func TestClassifyErrorRealTransport(t *testing.T) {
	t.Parallel()
	transports := []struct {
		name    string
		plain   func() roundTripCloser
		proxied func(u *url.URL) roundTripCloser
		capped  func(conns int) roundTripCloser // at most conns connections per host
	}{
		{"net/http", func() roundTripCloser { return &http.Transport{} },
			func(u *url.URL) roundTripCloser { return &http.Transport{Proxy: http.ProxyURL(u)} },
			func(n int) roundTripCloser { return &http.Transport{MaxConnsPerHost: n} }},
		{"runner", func() roundTripCloser { return h1.New(transportOptions(0, 4, nil, nil)) },
			func(u *url.URL) roundTripCloser { return h1.New(viaProxy(transportOptions(0, 4, nil, nil), u)) },
			func(n int) roundTripCloser { return h1.New(transportOptions(n, n, nil, nil)) }},
	}
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testClassifyErrorRealTransport(t, tc.name, tc.plain, tc.proxied, tc.capped)
		})
	}
}

func testClassifyErrorRealTransport(t *testing.T, name string, plain func() roundTripCloser, proxied func(*url.URL) roundTripCloser, capped func(int) roundTripCloser) {
	bg := context.Background()

	// A port on 127.0.0.1 that refuses connections: bound but not
	// listening, and held for the whole test, so no parallel test's server
	// can be given it (a closed listener's port could be).
	closedURL := "http://" + refusingAddr(t) + "/pay"

	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	plainSrv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plainSrv.Close)

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no tunnels", http.StatusForbidden)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatalf("parse proxy URL: %v", err)
	}

	// Reads the whole request, then closes without answering.
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(hangUp.Close)

	blocking, _ := classifyTestBlockingServer(t)

	tests := []struct {
		name         string
		run          func(t *testing.T) (Progress, error)
		shuttingDown bool
		want         Class
		wantReason   string
	}{
		{"connection refused", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, plain(), classifyTestRequest(t, bg, closedURL))
		}, false, ClassNoEffect, "connection refused"},
		{"certificate verification", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, plain(), classifyTestRequest(t, bg, tlsSrv.URL))
		}, false, ClassPermanent, "certificate verification failed"},
		{"https to a plain server", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, plain(), classifyTestRequest(t, bg, strings.Replace(plainSrv.URL, "http:", "https:", 1)))
		}, false, ClassNoEffect, "tls handshake failed"},
		{"proxy CONNECT refused", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, proxied(proxyURL), classifyTestRequest(t, bg, "https://target.invalid/pay"))
		}, false, ClassNoEffect, "request not sent"},
		{"bad URL", func(t *testing.T) (Progress, error) {
			_, err := http.NewRequest(http.MethodPost, "http://[::1/pay", nil)
			if err == nil {
				t.Fatal("http.NewRequest with a bad URL: nil error, want one")
			}
			return Progress{}, err
		}, false, ClassPermanent, "bad URL"},
		{"unsupported scheme", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, plain(), classifyTestRequest(t, bg, "ftp://127.0.0.1/pay"))
		}, false, ClassPermanent, "unsupported protocol scheme"},
		{"invalid header", func(t *testing.T) (Progress, error) {
			req := classifyTestRequest(t, bg, plainSrv.URL)
			req.Header["Bad Name"] = []string{"x"}
			return classifyTestDo(t, plain(), req)
		}, false, ClassPermanent, "invalid header field"},
		{"invalid header value", func(t *testing.T) (Progress, error) {
			req := classifyTestRequest(t, bg, plainSrv.URL)
			req.Header.Set("X-Note", "a\nb")
			return classifyTestDo(t, plain(), req)
		}, false, ClassPermanent, "invalid header field"},
		{"invalid method", func(t *testing.T) (Progress, error) {
			req := classifyTestRequest(t, bg, plainSrv.URL)
			req.Method = "BAD METHOD"
			return classifyTestDo(t, plain(), req)
		}, false, ClassPermanent, "invalid method"},
		{"invalid Host header through a proxy", func(t *testing.T) (Progress, error) {
			// Sent directly, net/http blanks an invalid Host; to a proxy it
			// refuses the request.
			req := classifyTestRequest(t, bg, "http://target.invalid/pay")
			req.Host = "bad\nhost"
			return classifyTestDo(t, proxied(proxyURL), req)
		}, false, ClassPermanent, "invalid Host header"},
		{"no host", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, plain(), classifyTestRequest(t, bg, "http:///pay"))
		}, false, ClassPermanent, "no Host in request URL"},
		{"canceled before sending", func(t *testing.T) (Progress, error) {
			ctx, cancel := context.WithCancel(bg)
			cancel()
			return classifyTestDo(t, plain(), classifyTestRequest(t, ctx, blocking.URL))
		}, true, ClassNoEffect, "canceled by shutdown before sending"},
		{"EOF after sending", func(t *testing.T) (Progress, error) {
			return classifyTestDo(t, plain(), classifyTestRequest(t, bg, hangUp.URL))
		}, false, ClassUnknown, "connection closed (EOF) after sending"},
		{"attempt timeout waiting for a connection to the host", func(t *testing.T) (Progress, error) {
			// The one connection allowed is held by a request the server
			// does not answer while the test runs.
			tr := capped(1)
			blocking, received := classifyTestBlockingServer(t)
			hold, release := context.WithCancel(bg)
			t.Cleanup(release) // runs before the server's cleanups
			first := classifyTestRequest(t, hold, blocking.URL)
			go func() {
				if resp, err := tr.RoundTrip(first); err == nil {
					resp.Body.Close()
				}
			}()
			select {
			case <-received:
			case <-time.After(5 * time.Second):
				t.Fatal("the first request did not reach the server within 5 s")
			}
			ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
			defer cancel()
			return classifyTestDo(t, tr, classifyTestRequest(t, ctx, blocking.URL))
		}, false, ClassNoEffect, "timed out before sending"},
		{"attempt timeout after sending", func(t *testing.T) (Progress, error) {
			ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
			defer cancel()
			return classifyTestDo(t, plain(), classifyTestRequest(t, ctx, blocking.URL))
		}, false, ClassUnknown, "timed out after sending"},
		{"ResponseHeaderTimeout", func(t *testing.T) (Progress, error) {
			tr := &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}
			return classifyTestDo(t, tr, classifyTestRequest(t, bg, blocking.URL))
		}, false, ClassUnknown, "ResponseHeaderTimeout"},
		{"shutdown after sending", func(t *testing.T) (Progress, error) {
			blocking, received := classifyTestBlockingServer(t)
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			go func() {
				select {
				case <-received:
					cancel()
				case <-time.After(5 * time.Second): // bound: never hang the test
					cancel()
				}
			}()
			return classifyTestDo(t, plain(), classifyTestRequest(t, ctx, blocking.URL))
		}, true, ClassUnknown, "canceled by shutdown after sending"},
	}
	for _, tt := range tests {
		if tt.name == "ResponseHeaderTimeout" && name != "net/http" {
			continue // a net/http Transport setting
		}
		p, err := tt.run(t)
		got := ClassifyError(err, p, tt.shuttingDown, ClassifyRules{})
		if tt.name == "invalid Host header through a proxy" && name == "net/http" && got.Class == ClassNoEffect && !p.WroteHeaders {
			// net/http's writer refuses the Host, and its reader sometimes
			// reports the connection it then closes instead: nothing was
			// written either way, which is what matters. (The runner's own
			// transport refuses it before net/http and always says so.)
			continue
		}
		if got.Class != tt.want || !strings.Contains(got.Reason, tt.wantReason) {
			t.Errorf("%s: ClassifyError(%v, %+v, %v) = %+v, want class %q, reason containing %q",
				tt.name, err, p, tt.shuttingDown, got, tt.want, tt.wantReason)
		}
	}
}

// An attempt stopped (attempt timeout or shutdown) after GotConn but
// before a single byte was flushed to the socket is provably not sent on
// the runner's own HTTP/1.1 transport (h1.NothingWritten), and send and
// the classifier make it no effect, although the trace hooks, which fire
// once the request is buffered, say it was written. Stop points: in the
// GotConn hook (the transport's first context check fails) and in the
// WroteRequest hook (the request sits whole in its write buffer, and the
// flush fails on the past deadline before any write(2)).
func TestStopBeforeAnyByteLeftIsNoEffect(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"GotConn", "WroteRequest"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			var got atomic.Int64          // bytes the server received
			closed := make(chan struct{}) // the server saw the connection close
			ln := loopback.Serve(t, func(c net.Conn) {
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
				close(closed)
			})
			tr := h1.New(transportOptions(4, 4, nil, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// A stop is the attempt's context ending; the transport's
			// AfterFunc then puts the connection's deadline in the past.
			// That runs in its own goroutine, so the test does it too, at
			// once: the stop's effect is in place before the next write.
			var conn net.Conn
			stop := func() {
				cancel()
				_ = conn.SetDeadline(time.Unix(1, 0)) // long past
			}
			hooks := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
				conn = i.Conn
				if at == "GotConn" {
					stop()
				}
			}}
			if at == "WroteRequest" {
				hooks.WroteRequest = func(httptrace.WroteRequestInfo) { stop() }
			}
			j := tlsJob("http://" + ln.Addr().String() + "/pay")
			res := send(httptrace.WithClientTrace(ctx, hooks), tr, j, 1<<10, time.Now)
			tr.CloseIdleConnections()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not see the connection end within 5 s")
			}
			v := ClassifyError(res.err, res.progress, true, ClassifyRules{})
			t.Logf("err %v, progress %+v, verdict %+v, server received %d bytes", res.err, res.progress, v, got.Load())
			if got.Load() != 0 {
				t.Errorf("the stop came before any write, yet the server received %d bytes", got.Load())
			}
			if v.Class != ClassNoEffect {
				t.Errorf("nothing reached the server, but the attempt is %s (%s); want no_effect", v.Class, v.Reason)
			}
		})
	}
}

func TestClassifyErrorRealHTTP2(t *testing.T) {
	t.Parallel()
	// A server that answers an HTTP/2 stream with RST_STREAM(REFUSED_STREAM)
	// right after reading its HEADERS, speaking the frames by hand.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go classifyTestRefuseStreams(ln)

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := classifyTestRequest(t, ctx, "http://"+ln.Addr().String()+"/pay")
	// With GetBody set, net/http's HTTP/2 client would resend the refused
	// stream by itself (up to 7 times, over about a minute); without it, the
	// refusal surfaces, as it will for the runner (P7).
	req.GetBody = nil
	p, err := classifyTestDo(t, tr, req)
	got := ClassifyError(err, p, false, ClassifyRules{})
	if got.Class != ClassNoEffect || !strings.Contains(got.Reason, "REFUSED_STREAM") {
		t.Errorf("ClassifyError(%v, %+v) = %+v, want no_effect with REFUSED_STREAM", err, p, got)
	}
}

// classifyTestRefuseStreams serves prior-knowledge HTTP/2 on ln, refusing
// every stream. It returns when ln is closed.
func classifyTestRefuseStreams(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
			if _, err := io.ReadFull(br, preface); err != nil {
				return
			}
			// Empty SETTINGS, then read frames; ack SETTINGS, refuse HEADERS.
			if _, err := conn.Write(classifyTestFrame(0x4, 0, 0, nil)); err != nil {
				return
			}
			for {
				var hdr [9]byte
				if _, err := io.ReadFull(br, hdr[:]); err != nil {
					return
				}
				length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
				typ, flags := hdr[3], hdr[4]
				stream := uint32(hdr[5]&0x7f)<<24 | uint32(hdr[6])<<16 | uint32(hdr[7])<<8 | uint32(hdr[8])
				if _, err := io.CopyN(io.Discard, br, int64(length)); err != nil {
					return
				}
				var out []byte
				switch {
				case typ == 0x4 && flags&0x1 == 0: // SETTINGS, not an ACK
					out = classifyTestFrame(0x4, 0x1, 0, nil)
				case typ == 0x1: // HEADERS
					out = classifyTestFrame(0x3, 0, stream, []byte{0, 0, 0, 0x7}) // RST_STREAM REFUSED_STREAM
				}
				if out != nil {
					if _, err := conn.Write(out); err != nil {
						return
					}
				}
			}
		}()
	}
}

// classifyTestFrame encodes one HTTP/2 frame.
func classifyTestFrame(typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags,
		byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
	return append(b, payload...)
}

func FuzzClassifyError(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzClassifyError.
	f.Fuzz(func(t *testing.T, msg string, progress uint8, shuttingDown, replaySafe bool) {
		p := Progress{
			GotConn:      progress&1 != 0,
			Reused:       progress&2 != 0,
			WroteHeaders: progress&4 != 0,
			WroteRequest: progress&8 != 0,
			GotFirstByte: progress&16 != 0,
		}
		rules := ClassifyRules{ReplaySafe: replaySafe}
		for _, err := range []error{errors.New(msg), &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: errors.New(msg)}} {
			got := ClassifyError(err, p, shuttingDown, rules)
			if got.Reason == "" || got.RetryAfterHonored {
				t.Fatalf("ClassifyError(%q, %+v) = %+v, want a reason and RetryAfterHonored false", msg, p, got)
			}
			switch got.Class {
			case ClassNoEffect, ClassPermanent:
			case ClassUnknown:
				// Before WroteHeaders only a stop with a connection in
				// hand may be unknown (HTTP/2 traces headers late).
				early := !p.WroteHeaders && !(p.GotConn && strings.Contains(got.Reason, "with a connection in hand"))
				if early || replaySafe {
					t.Fatalf("ClassifyError(%q, %+v, replaySafe %v) = %+v, want no_effect or permanent", msg, p, replaySafe, got)
				}
			default:
				t.Fatalf("ClassifyError(%q, %+v) = %q, want no_effect, permanent or unknown", msg, p, got.Class)
			}
			if got.Class == ClassPermanent && p.WroteHeaders {
				t.Fatalf("ClassifyError(%q, %+v) = permanent after headers were written, want never", msg, p)
			}
		}
	})
}

func BenchmarkClassifyResponse(b *testing.B) {
	rules := ClassifyRules{NoEffectStatuses: []int{503}}
	statuses := []int{200, 201, 302, 404, 409, 422, 429, 500, 503, 504}
	n := 0
	for b.Loop() {
		v := ClassifyResponse(statuses[n%len(statuses)], rules)
		if v.Class == "" {
			b.Fatal("empty class")
		}
		n++
	}
}

func BenchmarkClassifyError(b *testing.B) {
	err := &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: io.EOF}
	p := Progress{GotConn: true, WroteHeaders: true, WroteRequest: true}
	for b.Loop() {
		if v := ClassifyError(err, p, false, ClassifyRules{}); v.Class != ClassUnknown {
			b.Fatalf("class %q, want unknown", v.Class)
		}
	}
}

// FuzzClassifyUnquoted: emptying the quoted parts of an error text never
// grows it beyond the empty quotes it leaves, keeps a text without quotes
// as it is, and leaves no refusal phrase that sat inside quotes.
func FuzzClassifyUnquoted(f *testing.F) {
	for _, s := range []string{
		``, `plain`, `a "b" c`, `"unterminated`, `x "\"escaped\"" y`,
		`malformed MIME header line: "X: stream error: stream ID 1; REFUSED_STREAM"`,
		`debug="http2: Transport received GOAWAY from server"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := classifyUnquoted(s)
		if !strings.Contains(s, `"`) && got != s {
			t.Fatalf("classifyUnquoted(%q) = %q, want it unchanged", s, got)
		}
		if len(got) > len(s)+2 {
			t.Fatalf("classifyUnquoted(%q) = %q, longer than its input", s, got)
		}
		if q, err := strconv.QuotedPrefix(s); err == nil && q == s && s[0] == '"' && got != `""` {
			t.Fatalf("classifyUnquoted of a quoted string %q = %q, want \"\"", s, got)
		}
	})
}

// refusingAddr is a 127.0.0.1 address that refuses connections for the
// whole test: a socket bound to it that never listens.
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
