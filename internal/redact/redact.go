package redact

import (
	"net/http"
	"strings"

	"github.com/idemrun/idemrun/internal/httpsyntax"
)

// Placeholder replaces every hidden value.
const Placeholder = "REDACTED"

// DefaultHeaders returns the header names a Redactor always treats as
// sensitive: Authorization, Proxy-Authorization, Cookie, Set-Cookie and
// X-Api-Key. Beyond these, any name with a credential's word is sensitive
// too (see IsSensitiveHeader). Each call returns a new slice.
func DefaultHeaders() []string {
	return []string{"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key"}
}

// DefaultParams returns the URL query (and fragment) parameter names a
// Redactor always treats as sensitive: api_key, apikey, token, access_token,
// refresh_token, signature, sig, password, secret, client_secret and key.
// Beyond these, any name with a credential's word is sensitive too (see
// IsSensitiveParam). Each call returns a new slice.
func DefaultParams() []string {
	return []string{
		"api_key", "apikey", "token", "access_token", "refresh_token",
		"signature", "sig", "password", "secret", "client_secret", "key",
	}
}

// Redactor hides the values of sensitive headers and URL parameters. Build
// one with New; it is safe for concurrent use, since nothing changes it after
// New. A nil *Redactor behaves as New(nil, nil).
type Redactor struct {
	headers map[string]bool // lower-case names
	params  map[string]bool // lower-case names
	all     bool            // every header and parameter is sensitive (All)
}

// allRedactor is All's Redactor, built once.
var allRedactor = &Redactor{headers: nameSet(DefaultHeaders()), params: nameSet(DefaultParams()), all: true}

// All returns a Redactor that treats every header and every URL parameter
// as sensitive: for when the names that are sensitive cannot be known (a
// database whose recorded names cannot be read), so nothing is shown in
// clear that might be a secret.
func All() *Redactor { return allRedactor }

// New returns a Redactor that treats DefaultHeaders plus extraHeaders, and
// DefaultParams plus extraParams, as sensitive. Names are compared without
// regard to case; surrounding spaces are ignored and empty names skipped.
func New(extraHeaders, extraParams []string) *Redactor {
	return &Redactor{
		headers: nameSet(DefaultHeaders(), extraHeaders),
		params:  nameSet(DefaultParams(), extraParams),
	}
}

func nameSet(lists ...[]string) map[string]bool {
	m := make(map[string]bool)
	for _, list := range lists {
		for _, name := range list {
			if name = strings.TrimSpace(name); name != "" {
				m[strings.ToLower(name)] = true
			}
		}
	}
	return m
}

// defaultRedactor is New(nil, nil), built once: nothing changes a
// Redactor after New, so one is shared by every caller.
var defaultRedactor = New(nil, nil)

// Default returns a Redactor of the default names alone, as New(nil, nil)
// does, without building one.
func Default() *Redactor { return defaultRedactor }

// orDefault lets every method work on a nil receiver.
func (r *Redactor) orDefault() *Redactor {
	if r == nil {
		return defaultRedactor
	}
	return r
}

// IsSensitiveHeader reports whether values of the header called name are
// hidden, comparing names without regard to case: the listed names, and
// any name that looks like a credential's (secretLike).
func (r *Redactor) IsSensitiveHeader(name string) bool {
	n := strings.TrimSpace(name)
	r = r.orDefault()
	return r.all || r.headers[strings.ToLower(n)] || secretLike(n)
}

// IsSensitiveParam reports whether values of the URL parameter called name
// are hidden, comparing names without regard to case: the listed names,
// and any name that looks like a credential's (secretLike).
func (r *Redactor) IsSensitiveParam(name string) bool {
	n := strings.TrimSpace(name)
	r = r.orDefault()
	return r.all || r.params[strings.ToLower(n)] || secretLike(n)
}

// HeaderValue returns value as it may be shown for the header called name:
// unchanged when the header is not sensitive or the value is empty,
// Placeholder otherwise. For Authorization and Proxy-Authorization the
// scheme stays visible ("Bearer REDACTED"), since it helps debugging and
// hides nothing.
func (r *Redactor) HeaderValue(name, value string) string {
	if value == "" || !r.IsSensitiveHeader(name) {
		return value
	}
	if scheme, _, ok := splitAuth(name, value); ok {
		return scheme + " " + Placeholder
	}
	return Placeholder
}

// Header returns a copy of h with the values of sensitive headers replaced
// as HeaderValue does. h itself is not changed; a nil h gives nil.
func (r *Redactor) Header(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	r = r.orDefault()
	out := make(http.Header, len(h))
	for name, vals := range h {
		cp := make([]string, len(vals))
		for i, v := range vals {
			cp[i] = r.HeaderValue(name, v)
		}
		if vals == nil {
			cp = nil
		}
		out[name] = cp
	}
	return out
}

// splitAuth splits an Authorization or Proxy-Authorization value into its
// scheme and credentials. ok is false for other headers, and when the value
// has no scheme token followed by non-empty credentials.
func splitAuth(name, value string) (scheme, credentials string, ok bool) {
	if !strings.EqualFold(name, "Authorization") && !strings.EqualFold(name, "Proxy-Authorization") {
		return "", "", false
	}
	scheme, credentials, found := strings.Cut(strings.TrimLeft(value, " \t"), " ")
	credentials = strings.Trim(credentials, " \t")
	if !found || credentials == "" || !httpsyntax.IsToken(scheme) {
		return "", "", false
	}
	return scheme, credentials, true
}
