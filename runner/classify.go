package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/idemrun/idemrun/internal/h1"
)

// Progress is how far an attempt got, from httptrace callbacks.
type Progress struct {
	GotConn      bool // a connection was obtained
	Reused       bool // ... and it was a reused keep-alive connection
	WroteHeaders bool // all request headers were written
	WroteRequest bool // the whole request, body included, was written (WroteRequestInfo.Err == nil)
	GotFirstByte bool // the first response byte arrived
}

// Class is what one attempt's outcome means for the job (ARCHITECTURE.md §3).
type Class string

// The classes of an attempt's outcome.
const (
	// ClassSucceeded means the target answered 2xx: the effect happened.
	ClassSucceeded Class = "succeeded"
	// ClassNoEffect means the attempt certainly had no effect and may be
	// retried with the same key and bytes.
	ClassNoEffect Class = "no_effect"
	// ClassPermanent means the attempt had no effect and retrying cannot
	// help: the job fails.
	ClassPermanent Class = "permanent"
	// ClassUnknown means the attempt may have taken effect: the job must not
	// be sent again until a status query (or a key TTL) says it is safe.
	ClassUnknown Class = "unknown"
	// ClassInProgress means the target answered 409: it is still processing
	// a request with this key. Wait or query status; do not count it as
	// evidence either way.
	ClassInProgress Class = "in_progress"
	// ClassKeyMismatch means the target answered 422: the key was already
	// used with a different payload. The job needs attention.
	ClassKeyMismatch Class = "key_mismatch"
)

// Verdict is the classification of one attempt.
type Verdict struct {
	// Class is what the outcome means for the job.
	Class Class
	// Reason is a short human explanation, such as "connection refused" or
	// "503 from target: may have been processed".
	Reason string
	// RetryAfterHonored reports whether the response's Retry-After header,
	// if any, sets a floor on when the target may next be contacted (retry
	// or status query). It is true for every no_effect and in_progress
	// answer and for 503, and false for transport errors (no response).
	RetryAfterHonored bool
	// ReplayOfUnknown reports a no_effect that was unknown and is retried
	// only because the request is replay-safe: repeating it does no harm,
	// but the attempt may still have taken effect.
	ReplayOfUnknown bool
}

// ClassifyRules loosens the safe default classification for one job. The
// zero value applies ARCHITECTURE.md §3 unchanged.
type ClassifyRules struct {
	// NoEffectStatuses lists statuses the target promises it never acted on
	// (for example 503 meaning "not processed"). A listed non-2xx status is
	// no_effect whatever its default class. Default: none.
	NoEffectStatuses []int
	// ReplaySafe marks a request that may be repeated without harm: GET,
	// HEAD and OPTIONS (RFC 9110 §9.2.2), or a job that declared itself
	// replay-safe. Every unknown outcome becomes no_effect. Default: false.
	ReplaySafe bool
}

// ClassifyResponse classifies an attempt that got an HTTP answer with
// status, following ARCHITECTURE.md §3:
//
//   - 2xx: succeeded, always (rules cannot change it);
//   - 3xx: permanent, the redirect is not followed;
//   - 408, 425, 429: no_effect, Retry-After honored;
//   - 409: in_progress; 422: key_mismatch;
//   - every 5xx (500, 502, 503, 504, but also 501, 505 and the rest):
//     unknown, since a server error after the request arrived may follow
//     work already done, and a gateway may have forwarded the request;
//   - other 4xx: permanent;
//   - 1xx and anything outside 100–599: unknown (not a final answer we
//     understand).
//
// A status listed in rules.NoEffectStatuses is no_effect instead (except
// 2xx), and rules.ReplaySafe turns unknown into no_effect.
func ClassifyResponse(status int, rules ClassifyRules) Verdict {
	if status >= 200 && status <= 299 {
		return Verdict{Class: ClassSucceeded, Reason: classifyStatus(status) + " from target"}
	}
	if slices.Contains(rules.NoEffectStatuses, status) {
		return Verdict{
			Class:             ClassNoEffect,
			Reason:            classifyStatus(status) + " from target: declared not processed for this job",
			RetryAfterHonored: true,
		}
	}
	v := classifyDefaultStatus(status)
	if v.Class == ClassUnknown && rules.ReplaySafe {
		v.Class = ClassNoEffect
		v.Reason = classifyStatus(status) + " from target: replay-safe request, retrying"
		v.RetryAfterHonored = true
		v.ReplayOfUnknown = true
	}
	return v
}

// classifyDefaultStatus is ClassifyResponse for non-2xx statuses without
// any rules.
func classifyDefaultStatus(status int) Verdict {
	s := classifyStatus(status)
	switch {
	case status == 408 || status == 425 || status == 429:
		return Verdict{Class: ClassNoEffect, Reason: s + " from target: not processed, retry later", RetryAfterHonored: true}
	case status == 409:
		return Verdict{Class: ClassInProgress, Reason: "409 from target: a request with this key is still in progress", RetryAfterHonored: true}
	case status == 422:
		return Verdict{Class: ClassKeyMismatch, Reason: "422 from target: idempotency key reused with a different payload"}
	case status >= 300 && status <= 399:
		return Verdict{Class: ClassPermanent, Reason: "redirect not followed (" + s + ")"}
	case status >= 400 && status <= 499:
		return Verdict{Class: ClassPermanent, Reason: s + " from target: rejected"}
	case status >= 500 && status <= 599:
		return Verdict{Class: ClassUnknown, Reason: s + " from target: may have been processed", RetryAfterHonored: status == 503}
	default:
		return Verdict{Class: ClassUnknown, Reason: "unexpected status " + s + " from target: may have been processed"}
	}
}

func classifyStatus(status int) string { return strconv.Itoa(status) }

// ClassifyError classifies an attempt that ended in a transport error,
// without an HTTP response; p says how far the attempt got (httptrace) and
// shuttingDown whether the runner canceled it to stop. In order:
//
//  1. Nothing written yet (!p.WroteHeaders, even on a reused connection):
//     certificate verification failures, bad URLs, unsupported schemes,
//     invalid methods and invalid header fields are permanent; everything
//     else (DNS failure, connection refused, dial timeout, TLS handshake
//     failure, proxy CONNECT failure, a reused connection that broke,
//     cancellation before a connection was obtained) is no_effect. An
//     incomplete header block cannot be acted on. One exception: a
//     cancellation or timeout after p.GotConn is unknown, because net/http's
//     HTTP/2 client flushes HEADERS before calling WroteHeaders and returns
//     on cancellation without waiting for that callback.
//  2. HTTP/2 REFUSED_STREAM, or a GOAWAY whose LastStreamID is below our
//     stream (net/http reports that as "Transport received … GOAWAY"), is
//     no_effect at any point (RFC 9113 §8.7). The other GOAWAY error,
//     "server sent GOAWAY and closed the connection; LastStreamID=…", does
//     not carry our stream id (and net/http uses it for streams the server
//     did receive), so it stays unknown.
//  3. Anything else after the headers were written (reset, EOF, timeouts,
//     ResponseHeaderTimeout, context canceled or deadline exceeded) is
//     unknown. This includes errors that normally happen before sending
//     (a dial or certificate error) when p says headers went out: the
//     transport then tried twice, and the first try may have arrived.
//
// rules.ReplaySafe turns unknown into no_effect. A nil err is unknown.
func ClassifyError(err error, p Progress, shuttingDown bool, rules ClassifyRules) Verdict {
	v := classifyTransport(err, p, shuttingDown)
	if v.Class == ClassUnknown && rules.ReplaySafe {
		v.Class = ClassNoEffect
		v.Reason += " (replay-safe request, retrying)"
		v.ReplayOfUnknown = true
	}
	return v
}

// classifyTransport is ClassifyError without the rules.
func classifyTransport(err error, p Progress, shuttingDown bool) Verdict {
	if err == nil {
		return Verdict{Class: ClassUnknown, Reason: "no response and no error"}
	}
	text := classifyErrorText(err)
	if h1.NothingWritten(err) {
		// The runner's transport saw that no byte left, whatever p says.
		p = Progress{GotConn: p.GotConn, Reused: p.Reused}
		if reason, ok := classifyPermanent(err, text); ok {
			return Verdict{Class: ClassPermanent, Reason: reason}
		}
		return Verdict{Class: ClassNoEffect, Reason: classifyNotSent(err, text, p, shuttingDown)}
	}
	if !p.WroteHeaders {
		if reason, ok := classifyPermanent(err, text); ok {
			return Verdict{Class: ClassPermanent, Reason: reason}
		}
		if p.GotConn && classifyIsStop(err, text) {
			// net/http's HTTP/2 RoundTrip returns on cancellation without
			// waiting for its writer, which flushes HEADERS before it calls
			// WroteHeaders: the request may be out without p saying so.
			return Verdict{Class: ClassUnknown, Reason: classifyStopReason(err, shuttingDown) + " with a connection in hand: headers may have been sent"}
		}
		return Verdict{Class: ClassNoEffect, Reason: classifyNotSent(err, text, p, shuttingDown)}
	}
	// Only net/http's own words count, never text it quotes from the
	// server (a malformed header line, GOAWAY debug data): the server
	// chooses those bytes after doing the work, so they can prove no
	// refusal and name no cause.
	own := classifyUnquoted(text)
	if reason, ok := classifyHTTP2Refused(own); ok {
		return Verdict{Class: ClassNoEffect, Reason: reason}
	}
	if reason, ok := classifyHandshakeAlert(err, p); ok {
		return Verdict{Class: ClassNoEffect, Reason: reason}
	}
	if strings.HasPrefix(own, `failed to parse Location header ""`) {
		// http.Client (and the direct Doer, which answers as it does)
		// reports a 301/302/303 whose Location does not parse as an
		// error and drops the response. It was still a 3xx answer from
		// the target: permanent, never resent (ARCHITECTURE.md §3).
		return Verdict{Class: ClassPermanent, Reason: "redirect not followed (3xx; its Location header does not parse)"}
	}
	return Verdict{Class: ClassUnknown, Reason: classifyAfterSend(err, own, p, shuttingDown)}
}

// handshakeAlerts are the TLS alerts a server sends about the handshake
// itself (crypto/tls's own texts for them, not the server's words).
var handshakeAlerts = []string{
	"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
	"tls: unknown certificate", "tls: expired certificate", "tls: revoked certificate",
	"tls: unsupported certificate", "tls: handshake failure", "tls: access denied", "tls: error decrypting message",
}

// classifyHandshakeAlert recognises a TLS 1.3 server refusing the client's
// handshake (its certificate, most often) after the client has already
// written the request: in TLS 1.3 the client finishes first and sends at
// once, and the server's alert arrives on the first read. The server
// checks the client's handshake before it decrypts any application data,
// so on a fresh connection with no byte of an answer the request was never
// read: no effect (ARCHITECTURE.md §3, "TLS handshake failure").
func classifyHandshakeAlert(err error, p Progress) (string, bool) {
	if p.Reused || p.GotFirstByte {
		return "", false
	}
	oe, ok := errors.AsType[*net.OpError](err)
	if !ok || oe.Op != "remote error" || oe.Err == nil {
		return "", false
	}
	if slices.Contains(handshakeAlerts, oe.Err.Error()) {
		return "tls handshake failed: the server refused the client's handshake (" + oe.Err.Error() + "); request not read", true
	}
	return "", false
}

// classifyErrorText is err's message with *url.Error layers peeled off: their
// message repeats the request URL, whose query could contain any of the
// phrases matched below.
func classifyErrorText(err error) string {
	for {
		ue, ok := errors.AsType[*url.Error](err)
		if !ok || ue.Err == nil {
			return err.Error()
		}
		if ue.Op == "parse" {
			// The URL itself is the problem; keep it out of the text too.
			return "invalid URL"
		}
		err = ue.Err
	}
}

// classifyPermanent reports whether err is a failure that no retry can fix.
func classifyPermanent(err error, text string) (string, bool) {
	switch {
	case classifyHas[*tls.CertificateVerificationError](err),
		classifyHas[x509.UnknownAuthorityError](err),
		classifyHas[x509.HostnameError](err),
		classifyHas[x509.CertificateInvalidError](err),
		classifyHas[x509.SystemRootsError](err),
		classifyHas[x509.ConstraintViolationError](err),
		classifyHas[x509.UnhandledCriticalExtension](err),
		classifyHas[x509.InsecureAlgorithmError](err):
		return "certificate verification failed", true
	}
	ue, isURLErr := errors.AsType[*url.Error](err)
	if (isURLErr && ue.Op == "parse") || classifyHas[url.EscapeError](err) || classifyHas[url.InvalidHostError](err) {
		return "invalid request: bad URL", true
	}
	// net/http's messages for a request it refuses to send (transport.go,
	// request.go, h2_bundle.go, internal/httpcommon).
	invalidRequest := [...]string{
		"unsupported protocol scheme",
		"invalid header field",
		"invalid trailer field",
		"invalid HTTP header",
		"invalid method",
		"invalid Host header",
		"no Host in request URL",
		"nil Request.URL",
		"nil Request.Header",
	}
	for _, phrase := range invalidRequest {
		if strings.Contains(text, phrase) {
			return "invalid request: " + phrase, true
		}
	}
	return "", false
}

// classifyNotSent names the cause of a failure before anything was written.
func classifyNotSent(err error, text string, p Progress, shuttingDown bool) string {
	opErr, isOpErr := errors.AsType[*net.OpError](err)
	switch {
	case classifyHas[*net.DNSError](err):
		return "dns lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case isOpErr && opErr.Op == "proxyconnect":
		return "proxy connect failed"
	case classifyHas[tls.RecordHeaderError](err), classifyHas[tls.AlertError](err),
		classifyHas[*tls.AlertError](err), isOpErr && opErr.Op == "remote error",
		strings.Contains(text, "tls: "), strings.Contains(text, "TLS handshake"),
		strings.Contains(text, "gave HTTP response to HTTPS client"):
		return "tls handshake failed"
	case isOpErr && opErr.Op == "dial":
		if opErr.Timeout() {
			return "dial timeout"
		}
		return "dial failed"
	case shuttingDown && errors.Is(err, context.Canceled):
		return "canceled by shutdown before sending"
	case errors.Is(err, context.DeadlineExceeded) || classifyIsTimeout(err):
		return "timed out before sending"
	case p.Reused:
		return "reused connection failed before sending"
	case p.GotConn:
		return "connection failed before sending"
	default:
		return "no connection: request not sent"
	}
}

// classifyUnquoted is text with its Go-quoted ("%q") parts emptied:
// net/http quotes what the server sent (malformed status and header
// lines, GOAWAY debug data), and no phrase the server chose may count as
// proof that it did not process the request. An unterminated quote drops
// the rest of the text.
func classifyUnquoted(text string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '"')
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		q, err := strconv.QuotedPrefix(text[i:])
		if err != nil {
			return b.String()
		}
		b.WriteString(`""`)
		text = text[i+len(q):]
	}
}

// classifyHTTP2Refused reports an HTTP/2 refusal that proves the server
// did not process our stream.
func classifyHTTP2Refused(text string) (string, bool) {
	switch {
	case classifyRefusedStream(text):
		return "http2 stream refused (REFUSED_STREAM)", true
	case strings.Contains(text, "http2: Transport received Server's graceful shutdown GOAWAY"),
		strings.Contains(text, "http2: Transport received GOAWAY from server"):
		return "http2 GOAWAY before our stream", true
	}
	return "", false
}

// classifyRefusedStream reports whether text holds net/http's HTTP/2
// stream error "stream error: stream ID N; REFUSED_STREAM", alone or inside
// its "cannot retry err [...]" wrapper; a bare "REFUSED_STREAM" elsewhere
// (say, quoted from a malformed response) does not count.
func classifyRefusedStream(text string) bool {
	const prefix = "stream error: stream ID "
	for {
		i := strings.Index(text, prefix)
		if i < 0 {
			return false
		}
		text = text[i+len(prefix):]
		digits := len(text) - len(strings.TrimLeft(text, "0123456789"))
		if digits > 0 && strings.HasPrefix(text[digits:], "; REFUSED_STREAM") {
			return true
		}
	}
}

// classifyAfterSend names the cause of a failure after the headers left.
func classifyAfterSend(err error, text string, p Progress, shuttingDown bool) string {
	suffix := " after sending"
	if !p.WroteRequest {
		suffix = " while sending the body"
	}
	switch {
	case errors.Is(err, context.Canceled):
		if shuttingDown {
			return "canceled by shutdown" + suffix
		}
		return "canceled" + suffix
	case strings.Contains(text, "timeout awaiting response headers"):
		return "no response headers in time (ResponseHeaderTimeout)"
	case errors.Is(err, context.DeadlineExceeded) || classifyIsTimeout(err):
		return "timed out" + suffix
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset" + suffix
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed (EOF)" + suffix
	case strings.Contains(text, "GOAWAY"):
		return "http2 GOAWAY, our stream may have been received"
	default:
		return "transport error" + suffix
	}
}

// classifyIsStop reports a cancellation or timeout, the errors with which
// RoundTrip may return before its trace callbacks have run.
func classifyIsStop(err error, text string) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		classifyIsTimeout(err) || strings.Contains(text, "request canceled")
}

// classifyStopReason names a cancellation or timeout.
func classifyStopReason(err error, shuttingDown bool) string {
	switch {
	case shuttingDown && errors.Is(err, context.Canceled):
		return "canceled by shutdown"
	case errors.Is(err, context.DeadlineExceeded) || classifyIsTimeout(err):
		return "timed out"
	default:
		return "canceled"
	}
}

// classifyIsTimeout reports a net.Error timeout anywhere in err's chain.
func classifyIsTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// classifyHas reports whether err's chain holds an error of type E.
func classifyHas[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}
