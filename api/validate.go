package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/httpsyntax"
	"github.com/idemrun/idemrun/internal/redact"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store/bolt"
)

// KeyAccepted says what an idempotency key may be, for error messages:
// idemkey.Validate's rules.
const KeyAccepted = idemkey.Accepted

// Limits on what a caller controls. Each is enforced at enqueue with an
// *InvalidError naming the field.
const (
	MaxURLLen          = 8 << 10
	MaxBodyLen         = 1 << 20
	MaxHeaders         = 100
	MaxHeaderBytes     = 64 << 10 // all names and values together
	MaxAttemptsLimit   = 100
	MaxDeadline        = 30 * 24 * time.Hour
	MaxAttemptTimeout  = 10 * time.Minute
	MaxKeyTTL          = 365 * 24 * time.Hour
	MaxTemplateLen     = 2048
	MaxNoteLen         = 4096
	DefaultMaxAttempts = 5
	DefaultDeadline    = 15 * time.Minute
	DefaultAttemptTO   = 10 * time.Second
)

// ErrInvalid is wrapped by every *InvalidError.
var ErrInvalid = errors.New("api: invalid input")

// InvalidError says which input was refused, its value, and what is
// accepted. Nothing was written when it is returned.
type InvalidError struct {
	Field    string
	Value    string
	Accepted string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid %s %s: accepted: %s", e.Field, e.Value, e.Accepted)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, value, accepted string) *InvalidError {
	return &InvalidError{Field: field, Value: quoteShort(value), Accepted: accepted}
}

// Invalid returns the InvalidError for field refusing value (shown quoted,
// cut to 64 bytes) with what the field accepts, for callers such as the
// CLI that check input of their own.
func Invalid(field, value, accepted string) *InvalidError { return invalid(field, value, accepted) }

func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// ValidateURL checks a job URL: absolute http or https, a host, a valid
// port, no user:password, at most MaxURLLen bytes.
func ValidateURL(field, raw string) error {
	return validateURL(redact.Default(), field, raw)
}

// validateURL is ValidateURL with the URL shown in errors redacted by red
// (a client's own sensitive names included).
func validateURL(red *redact.Redactor, field, raw string) error {
	const acc = "an absolute http:// or https:// URL with a host, no user:password, a port in 1-65535, at most 8192 bytes"
	if len(raw) > MaxURLLen {
		return &InvalidError{Field: field, Value: fmt.Sprintf("(%d bytes)", len(raw)), Accepted: acc}
	}
	// Error values show the URL redacted: it may carry credentials.
	shown := func() string { return red.URL(raw) }
	if raw == "" {
		return invalid(field, shown(), acc)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < 0x21 || raw[i] == 0x7f {
			return invalid(field, shown(), acc+" (no spaces or control characters)")
		}
	}
	if !utf8.ValidString(raw) {
		// JSON (the admin API) would change such bytes on the way.
		return invalid(field, shown(), acc+" (valid UTF-8; percent-encode other bytes)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid(field, shown(), acc)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid(field, shown(), acc)
	}
	if u.User != nil {
		return &InvalidError{Field: field, Value: strconv.Quote(u.Scheme + "://REDACTED@" + u.Host), Accepted: acc + "; put credentials in a header (Authorization: …)"}
	}
	if u.Hostname() == "" || u.Opaque != "" {
		return invalid(field, shown(), acc)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return invalid(field, shown(), acc)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return invalid(field, shown(), acc)
	}
	if strings.HasPrefix(u.Hostname(), "[") || (strings.Contains(u.Hostname(), ":") && net.ParseIP(u.Hostname()) == nil) {
		return invalid(field, shown(), acc)
	}
	return nil
}

// ValidateMethod checks an HTTP method token.
func ValidateMethod(m string) error {
	if m == "" || len(m) > 32 || !httpsyntax.IsToken(m) {
		return invalid("method", m, "an HTTP method token such as POST, PUT, PATCH, DELETE, GET")
	}
	if m == http.MethodConnect || m == http.MethodTrace {
		return invalid("method", m, "a method other than CONNECT and TRACE (they are not job requests)")
	}
	return nil
}

func validateHeader(h Header) error {
	const acc = "'Name: value' with a valid header name (RFC 9110 token) and a value without CR, LF or NUL"
	if !httpsyntax.IsToken(h.Name) {
		// Only a leading part that looks like a header name is shown: a
		// line such as "Authorization Bearer sk_…:…" puts a credential
		// before its first colon.
		return &InvalidError{Field: "header name", Value: hiddenLine(shownHeaderName(h.Name)), Accepted: acc}
	}
	if !httpsyntax.ValidHeaderValue(h.Value) {
		return &InvalidError{Field: "header " + h.Name, Value: "(value with CR, LF or control characters)", Accepted: acc}
	}
	if !utf8.ValidString(h.Value) {
		// JSON (the admin API) would change such bytes on the way, and the
		// job would send other bytes than were enqueued.
		return &InvalidError{Field: "header " + h.Name, Value: "(value that is not valid UTF-8)", Accepted: acc + ", in valid UTF-8"}
	}
	switch http.CanonicalHeaderKey(h.Name) {
	case "Host":
		if !validHostValue(h.Value) {
			return invalid("header Host", h.Value, "a host name or [IPv6] address with an optional :port, so it is sent exactly as stored")
		}
	case idemkey.HeaderName, "X-Idempotency-Key":
		return invalid("header name", h.Name, "any header but Idempotency-Key: idemrun sets it from the job's key")
	case "Content-Length", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade", "Keep-Alive", "Proxy-Connection":
		return invalid("header name", h.Name, "end-to-end headers; idemrun sets framing headers itself")
	}
	return nil
}

func validateHeaders(hs []Header) error {
	if len(hs) > MaxHeaders {
		return &InvalidError{Field: "headers", Value: strconv.Itoa(len(hs)), Accepted: fmt.Sprintf("at most %d headers", MaxHeaders)}
	}
	total := 0
	for _, h := range hs {
		if err := validateHeader(h); err != nil {
			return err
		}
		total += len(h.Name) + len(h.Value)
	}
	if total > MaxHeaderBytes {
		return &InvalidError{Field: "headers", Value: fmt.Sprintf("(%d bytes)", total), Accepted: fmt.Sprintf("at most %d bytes of header names and values", MaxHeaderBytes)}
	}
	return nil
}

func validateDuration(field string, d time.Duration, zeroOK bool, max time.Duration) error {
	if d < 0 || (d == 0 && !zeroOK) || d > max {
		lo := "greater than 0"
		if zeroOK {
			lo = "0 (unset) or positive"
		}
		return invalid(field, d.String(), fmt.Sprintf("a duration %s and at most %s, such as %s", lo, shortDuration(max), durationExamples(max)))
	}
	return nil
}

// durationExamples names up to three durations within max: an example
// past a field's own bound would invite the next refusal.
func durationExamples(max time.Duration) string {
	var ex []string
	for _, d := range []time.Duration{48 * time.Hour, 2 * time.Hour, 5 * time.Minute, 30 * time.Second, 500 * time.Millisecond} {
		if d <= max && len(ex) < 3 {
			ex = append([]string{shortDuration(d)}, ex...)
		}
	}
	if len(ex) == 0 {
		return shortDuration(max)
	}
	return strings.Join(ex, ", ")
}

// shortDuration is d as a person writes it: 5m rather than 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// validate checks a request and its options, filling defaults. It returns
// the first problem as an *InvalidError.
func (c *Client) validate(req *Request, o *EnqueueOptions) error {
	if req.Method == "" {
		req.Method = http.MethodPost
	}
	req.Method = strings.ToUpper(req.Method)
	if err := ValidateMethod(req.Method); err != nil {
		return err
	}
	if err := validateURL(c.red, "url", req.URL); err != nil {
		return err
	}
	if err := c.checkHost(req.URL); err != nil {
		return err
	}
	if err := validateHeaders(req.Header); err != nil {
		return err
	}
	if len(req.Body) > MaxBodyLen {
		return &InvalidError{Field: "body", Value: fmt.Sprintf("(%d bytes)", len(req.Body)), Accepted: fmt.Sprintf("at most %d bytes (1 MiB)", MaxBodyLen)}
	}
	if o.KeyFormat != idemkey.FormatToken && o.KeyFormat != idemkey.FormatStructured {
		return invalid("key-format", o.KeyFormat.String(), "token or structured")
	}
	if o.Key != "" {
		if err := idemkey.Validate(o.Key); err != nil {
			acc := KeyAccepted
			if ke, ok := errors.AsType[*idemkey.InvalidKeyError](err); ok {
				acc += " (this one " + ke.Reason + ")"
			}
			return &InvalidError{Field: "key", Value: quoteShort(o.Key), Accepted: acc}
		}
	}
	if o.StatusURL != "" {
		if len(o.StatusURL) > MaxTemplateLen {
			return &InvalidError{Field: "status-url", Value: fmt.Sprintf("(%d bytes)", len(o.StatusURL)), Accepted: fmt.Sprintf("at most %d bytes", MaxTemplateLen)}
		}
		// Shown redacted: the template may carry credentials.
		shownTpl := func() string { return quoteShort(c.red.URL(o.StatusURL)) }
		if !utf8.ValidString(o.StatusURL) {
			return &InvalidError{Field: "status-url", Value: shownTpl(), Accepted: "an http(s) URL template in valid UTF-8 (percent-encode other bytes)"}
		}
		tpl, err := c.template(o.StatusURL)
		if err != nil {
			red := c.red
			return &InvalidError{Field: "status-url", Value: shownTpl(), Accepted: "an http(s) URL template containing {key} or {id}, e.g. https://api.example.com/payments?key={key} (" + red.String(err.Error(), red.Secrets(nil, o.StatusURL)...) + ")"}
		}
		if c.allow != nil {
			if err := c.checkHost(templateURL(o.StatusURL)); err != nil {
				return err
			}
		}
		if o.Key != "" {
			if _, err := tpl.Expand(o.Key, "01940000-0000-7000-8000-000000000000"); errors.Is(err, statusquery.ErrInvalidValue) {
				return &InvalidError{Field: "key", Value: quoteShort(o.Key), Accepted: "a key that fits into the status-url template (" + err.Error() + ")"}
			}
		}
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = c.opts.DefaultMaxAttempts
	}
	if o.MaxAttempts < 1 || o.MaxAttempts > MaxAttemptsLimit {
		return invalid("max-attempts", strconv.Itoa(o.MaxAttempts), fmt.Sprintf("an integer from 1 to %d", MaxAttemptsLimit))
	}
	if o.Deadline == 0 {
		o.Deadline = c.opts.DefaultDeadline
	}
	if err := validateDuration("deadline", o.Deadline, false, MaxDeadline); err != nil {
		return err
	}
	if err := checkRunAt(c.now(), o.RunAt, o.Deadline); err != nil {
		return err
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = c.opts.DefaultAttemptTimeout
	}
	if err := validateDuration("attempt-timeout", o.AttemptTimeout, false, MaxAttemptTimeout); err != nil {
		return err
	}
	if err := validateDuration("key-ttl", o.KeyTTL, true, MaxKeyTTL); err != nil {
		return err
	}
	for _, s := range o.NoEffectStatuses {
		if s < 400 || s > 599 {
			return invalid("no-effect-status", strconv.Itoa(s), "HTTP status codes from 400 to 599 that the target guarantees were not processed")
		}
	}
	return nil
}

// Validate checks a request and its options the way Enqueue does, without a
// database, and returns the first problem as an *InvalidError. allowHosts is
// the optional target allowlist.
func Validate(req Request, o EnqueueOptions, allowHosts []string) (*Request, error) {
	return validateWith(redact.Default(), req, o, allowHosts)
}

// ValidateFor is Validate for a job that is to go into the database at
// path: an error shows URLs redacted with the sensitive names recorded in
// that file too (Options.SensitiveHeaders and SensitiveParams of earlier
// opens). When the file exists but its names cannot be read — another
// process holds it, say — every header and URL parameter value in the
// error is hidden. Only a refused job costs the file's read (a shared
// lock for up to 100 ms): it is meant for a command-line check before the
// file is opened; an application with the database open has its own
// Client, whose refusals know the names.
func ValidateFor(path string, req Request, o EnqueueOptions, allowHosts []string) (*Request, error) {
	r, err := Validate(req, o, allowHosts)
	if err == nil {
		return r, nil
	}
	if IsURL(path) {
		// The database's recorded names are not read before it is
		// opened: every value is hidden instead.
		return validateWith(redact.All(), req, o, allowHosts)
	}
	if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
		return nil, err // no file, no recorded names: the defaults are all
	}
	return validateWith(recordedRedactor(path), req, o, allowHosts)
}

// recordedRedactor returns the redaction rules for the sensitive names
// recorded in the database at path, or All when they cannot be read.
func recordedRedactor(path string) *redact.Redactor {
	db, err := bolt.Open(path, &bolt.Options{ReadOnly: true, MustExist: true, LockTimeout: 100 * time.Millisecond})
	if err != nil {
		return redact.All()
	}
	defer db.Close()
	hs, ps, err := db.SensitiveNames()
	if err != nil {
		return redact.All()
	}
	return redact.New(hs, ps)
}

func validateWith(red *redact.Redactor, req Request, o EnqueueOptions, allowHosts []string) (*Request, error) {
	a, err := newHostAllow(allowHosts)
	if err != nil {
		return nil, err
	}
	c := validator(red, a)
	req.Header = append([]Header(nil), req.Header...)
	if err := c.validate(&req, &o); err != nil {
		return nil, err
	}
	return &req, nil
}

// validator is a client without a store, for checking input as Enqueue
// does with the default limits; red shows the refused values (nil: the
// default names).
func validator(red *redact.Redactor, a *hostAllow) *Client {
	if red == nil {
		red = redact.Default()
	}
	return &Client{opts: Options{DefaultMaxAttempts: DefaultMaxAttempts, DefaultDeadline: DefaultDeadline, DefaultAttemptTimeout: DefaultAttemptTO}, allow: a, red: red}
}

// now is the client's clock, or the wall clock for a bare validator.
func (c *Client) now() time.Time {
	if c.opts.Now != nil {
		return c.opts.Now()
	}
	return time.Now()
}

// checkRunAt refuses a first attempt at or after the job's deadline
// (enqueue time + deadline), so a batch is refused before anything of it
// is written, as a single enqueue is.
func checkRunAt(now, runAt time.Time, deadline time.Duration) error {
	if !runAt.IsZero() && runAt.After(now) && runAt.After(now.Add(deadline)) {
		return invalid("run-at", runAt.UTC().Format(time.RFC3339), "a time before the job's deadline (enqueue time + deadline, at most 30 days ahead)")
	}
	return nil
}

// validHostValue accepts host, host:port, [v6] and [v6]:port, the forms
// net/http sends unchanged.
func validHostValue(v string) bool {
	host, port := v, ""
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return false
		}
		host, port = v[1:end], v[end+1:]
		if host == "" || strings.Trim(host, "0123456789abcdefABCDEF:.") != "" {
			return false
		}
	} else {
		if i := strings.LastIndexByte(v, ':'); i >= 0 {
			host, port = v[:i], v[i:]
		}
		if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" {
			return false
		}
	}
	if port == "" {
		return true
	}
	if port[0] != ':' || len(port) < 2 || len(port) > 6 {
		return false
	}
	n, err := strconv.Atoi(port[1:])
	return err == nil && n >= 0 && n <= 65535 && strings.Trim(port[1:], "0123456789") == ""
}

// template parses a status URL template. Jobs of one application mostly
// share their template, so the last one parsed is kept and reused; a
// Template never changes once parsed.
func (c *Client) template(raw string) (*statusquery.Template, error) {
	if t := c.lastTemplate.Load(); t != nil && t.String() == raw {
		return t, nil
	}
	t, err := statusquery.ParseTemplate(raw)
	if err != nil {
		return nil, err
	}
	c.lastTemplate.Store(t)
	return t, nil
}
