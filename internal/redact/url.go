package redact

import (
	"net/url"
	"strings"
)

// URL returns raw with the values of sensitive query parameters, of
// sensitive key=value pairs in the fragment (where OAuth puts
// access_token), both separated by '&' or ';', and of sensitive ;name=value
// parameters in the path (where Java servers put jsessionid) replaced by
// Placeholder, and with a userinfo password replaced by Placeholder.
// Everything else stays byte-for-byte as it was: parameter order,
// escaping, the rest of the path. A user name is kept.
//
// URL never panics. When url.Parse rejects raw, everything after the first
// '?' or '#' is replaced by Placeholder, and a password in what looks like
// userinfo and path parameters are hidden as above.
func (r *Redactor) URL(raw string) string {
	if !strings.ContainsAny(raw, "?#@;") {
		// No query, no fragment, no userinfo, no path parameters:
		// nothing to hide, whether or not raw parses.
		return raw
	}
	r = r.orDefault()
	if _, err := url.Parse(raw); err != nil {
		i := strings.IndexAny(raw, "?#")
		if i < 0 {
			return r.redactPathParams(redactPassword(raw, false))
		}
		return r.redactPathParams(redactPassword(raw[:i], false)) + raw[i:i+1] + Placeholder
	}
	rest, frag, hasFrag := strings.Cut(raw, "#")
	base, query, hasQuery := strings.Cut(rest, "?")
	var b strings.Builder
	b.Grow(len(raw) + len(Placeholder))
	b.WriteString(r.redactPathParams(redactPassword(base, true)))
	if hasQuery {
		b.WriteByte('?')
		r.writePairs(&b, query)
	}
	if hasFrag {
		b.WriteByte('#')
		r.writePairs(&b, frag)
	}
	return b.String()
}

// writePairs writes the &-separated pairs of s to b, hiding what
// sensitiveAt finds in each.
func (r *Redactor) writePairs(b *strings.Builder, s string) {
	for i, pair := range strings.Split(s, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		if at, ok := r.sensitiveAt(pair); ok {
			b.WriteString(pair[:at])
			b.WriteString(Placeholder)
			continue
		}
		b.WriteString(pair)
	}
}

// sensitiveAt finds in one &-separated part the first of its
// ;-separated parameters with a sensitive name and a non-empty rest, and
// returns where that rest begins: the value runs to the part's end, since
// where ';' separates nothing the rest is the value (servers disagree, and
// Go's net/url split at ';' before 1.17). The segments are bounded by the
// part's ';' count.
func (r *Redactor) sensitiveAt(part string) (int, bool) {
	for off := 0; off <= len(part); {
		seg, _, more := strings.Cut(part[off:], ";")
		if name, _, ok := strings.Cut(seg, "="); ok && off+len(name)+1 < len(part) && r.IsSensitiveParam(unescape(name)) {
			return off + len(name) + 1, true
		}
		if !more {
			break
		}
		off += len(seg) + 1
	}
	return 0, false
}

// sensitivePairs returns the raw values of sensitive parameters in the query
// and fragment of raw, whether or not raw parses: each to the end of its
// &-separated part, and up to its next ';' too.
func (r *Redactor) sensitivePairs(raw string) []string {
	i := strings.IndexAny(raw, "?#")
	if i < 0 {
		return nil
	}
	var vals []string
	for _, part := range strings.FieldsFunc(raw[i+1:], func(c rune) bool { return c == '&' || c == '#' || c == '?' }) {
		if at, ok := r.sensitiveAt(part); ok {
			v := part[at:]
			vals = append(vals, v)
			if first, _, cut := strings.Cut(v, ";"); cut && first != "" {
				vals = append(vals, first)
			}
		}
	}
	return vals
}

// pathStart returns where the path of s (a URL without its query and
// fragment) begins: after the authority, whose userinfo may hold ';'.
func pathStart(s string) int {
	i := strings.Index(s, "//")
	if i < 0 || strings.IndexByte(s[:i], '/') >= 0 {
		return 0
	}
	j := strings.IndexByte(s[i+2:], '/')
	if j < 0 {
		return len(s)
	}
	return i + 2 + j
}

// redactPathParams hides in the path of s (a URL without its query and
// fragment) the values of sensitive ;name=value parameters of each
// segment, each to the end of its segment.
func (r *Redactor) redactPathParams(s string) string {
	start := pathStart(s)
	if !strings.Contains(s[start:], ";") {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:start])
	for k, seg := range strings.Split(s[start:], "/") {
		if k > 0 {
			b.WriteByte('/')
		}
		if _, params, ok := strings.Cut(seg, ";"); ok {
			if at, found := r.sensitiveAt(params); found {
				b.WriteString(seg[:len(seg)-len(params)+at])
				b.WriteString(Placeholder)
				continue
			}
		}
		b.WriteString(seg)
	}
	return b.String()
}

// pathParamValues returns the raw values redactPathParams hides in s.
func (r *Redactor) pathParamValues(s string) []string {
	var vals []string
	for seg := range strings.SplitSeq(s[pathStart(s):], "/") {
		if _, params, ok := strings.Cut(seg, ";"); ok {
			if at, found := r.sensitiveAt(params); found {
				vals = append(vals, params[at:])
			}
		}
	}
	return vals
}

// unescape query-unescapes s, or returns it unchanged if it is malformed.
func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// userinfoPassword finds the password in the authority of s, which must not
// contain the query or fragment. It returns its byte offsets, or ok false.
// strict requires the authority to follow "scheme:" or start s, as in a URL
// that parses; otherwise any "//" with no '/' before it will do.
func userinfoPassword(s string, strict bool) (start, end int, ok bool) {
	i := strings.Index(s, "//")
	if i < 0 || strings.IndexByte(s[:i], '/') >= 0 || (strict && i > 0 && !isScheme(s[:i])) {
		return 0, 0, false
	}
	authStart := i + 2
	authority := s[authStart:]
	if j := strings.IndexByte(authority, '/'); j >= 0 {
		authority = authority[:j]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return 0, 0, false
	}
	colon := strings.IndexByte(authority[:at], ':')
	if colon < 0 || colon+1 == at {
		return 0, 0, false
	}
	return authStart + colon + 1, authStart + at, true
}

// redactPassword hides a userinfo password in s (a URL without its query and
// fragment); strict is as for userinfoPassword.
func redactPassword(s string, strict bool) string {
	start, end, ok := userinfoPassword(s, strict)
	if !ok {
		return s
	}
	return s[:start] + Placeholder + s[end:]
}

// isScheme reports whether s is "scheme:" as RFC 3986 defines a scheme.
func isScheme(s string) bool {
	name, ok := strings.CutSuffix(s, ":")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}
