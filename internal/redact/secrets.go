package redact

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// MinSecretLen is the shortest secret String replaces (4 bytes): shorter
// ones would blank out ordinary words and numbers in the text.
const MinSecretLen = 4

// String returns s with every occurrence of each secret of at least
// MinSecretLen bytes replaced by Placeholder; shorter or empty secrets are
// ignored. Where secrets overlap, the longest match at the earliest position
// wins. It is meant for error texts and log lines that may echo a header
// value; Secrets collects what to pass.
func (r *Redactor) String(s string, secrets ...string) string {
	var use []string
	for _, sec := range secrets {
		if len(sec) >= MinSecretLen {
			use = append(use, sec)
			// Error texts quote URLs Go-style (%q): a secret with a quote,
			// a backslash or an unprintable rune appears escaped there.
			if q := strconv.Quote(sec); q[1:len(q)-1] != sec {
				use = append(use, q[1:len(q)-1])
			}
		}
	}
	if len(use) == 0 {
		return s
	}
	// strings.Replacer tries the old strings in argument order at each
	// position, so longest first makes the longest match win.
	slices.SortStableFunc(use, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	args := make([]string, 0, 2*len(use))
	for _, sec := range use {
		args = append(args, sec, Placeholder)
	}
	return strings.NewReplacer(args...).Replace(s)
}

// Secrets returns the sensitive values found in h and rawURLs, for String:
// each sensitive header value whole; for Authorization and
// Proxy-Authorization also the credentials after the scheme (and for Basic,
// the decoded "user:password" and the password); for Cookie and Set-Cookie
// also each cookie value; the values of sensitive query and fragment
// parameters and path parameters, raw and unescaped; and a userinfo
// password, raw and unescaped.
// Each value appears once, in a deterministic order (headers sorted by name
// first, then the URLs in order). h may be nil and rawURLs empty.
func (r *Redactor) Secrets(h http.Header, rawURLs ...string) []string {
	r = r.orDefault()
	var out []string
	seen := make(map[string]bool)
	add := func(vals ...string) {
		for _, v := range vals {
			if v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	names := make([]string, 0, len(h))
	for name := range h {
		if r.IsSensitiveHeader(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range h[name] {
			add(v, strings.TrimSpace(v))
			if scheme, cred, ok := splitAuth(name, v); ok {
				add(cred)
				if strings.EqualFold(scheme, "Basic") {
					if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
						_, pass, _ := strings.Cut(string(dec), ":")
						add(string(dec), pass)
					}
				}
			}
			if strings.EqualFold(name, "Cookie") || strings.EqualFold(name, "Set-Cookie") {
				add(cookieValues(name, v)...)
			}
		}
	}
	for _, rawURL := range rawURLs {
		for _, v := range r.sensitivePairs(rawURL) {
			add(v, unescape(v))
		}
		base := rawURL
		if i := strings.IndexAny(base, "?#"); i >= 0 {
			base = base[:i]
		}
		if start, end, ok := userinfoPassword(base, false); ok {
			p := base[start:end]
			add(p, unescape(p))
		}
		for _, v := range r.pathParamValues(base) {
			add(v, unescape(v))
		}
	}
	return out
}

// cookieValues returns the values in a Cookie header (name=value; ...), or
// the cookie value of a Set-Cookie header (its attributes are not secret).
func cookieValues(header, v string) []string {
	parts := strings.Split(v, ";")
	if strings.EqualFold(header, "Set-Cookie") {
		parts = parts[:1]
	}
	var vals []string
	for _, p := range parts {
		if _, val, ok := strings.Cut(p, "="); ok {
			vals = append(vals, strings.Trim(strings.TrimSpace(val), `"`))
		}
	}
	return vals
}
