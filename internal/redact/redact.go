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

// secretWords are the words (between "-", "_", "." and the like) that make
// a header or parameter name a credential's: X-Auth-Token, Private-Token,
// X-Amz-Signature, X-Amz-Credential, client_secret, session_id, ….
var secretWords = map[string]bool{
	"token": true, "secret": true, "password": true, "passwd": true, "pwd": true,
	"credential": true, "credentials": true, "signature": true, "auth": true,
	"authorization": true, "session": true, "cookie": true, "apikey": true,
}

// keyKinds are the words that make a following "key" a credential
// (X-Goog-Api-Key, Ocp-Apim-Subscription-Key, access_key); other keys
// (idempotency_key, sort_key, X-Routing-Key) are not.
var keyKinds = map[string]bool{
	"api": true, "access": true, "secret": true, "private": true, "subscription": true,
	"client": true, "signing": true, "master": true, "encryption": true, "license": true,
}

// secretLike reports whether a name has a credential's word, or "key"
// after a word that makes it one (not a bare "key", which only the lists
// name). Words are split at anything but letters and digits and where a
// lower-case letter or digit meets an upper-case one, so camelCase names
// (accessToken, clientSecret, accessKey) split as their writers meant.
func secretLike(name string) bool {
	var words []string
	start := -1
	for i := 0; i <= len(name); i++ {
		var c byte
		if i < len(name) {
			c = name[i]
		}
		lower := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		upper := c >= 'A' && c <= 'Z'
		if start >= 0 && (!(lower || upper) || upper && i > 0 && isLowerOrDigit(name[i-1])) {
			words = append(words, strings.ToLower(name[start:i]))
			start = -1
		}
		if start < 0 && (lower || upper) {
			start = i
		}
	}
	for i, w := range words {
		if secretWords[w] || (w == "key" && i > 0 && keyKinds[words[i-1]]) {
			return true
		}
	}
	return false
}

func isLowerOrDigit(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

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
