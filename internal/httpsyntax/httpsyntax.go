// Package httpsyntax holds the HTTP grammar checks shared by the API's
// validation, the redactor and the runner's transport, so all three accept
// and refuse exactly the same methods, header names, values and hosts.
package httpsyntax

import "strings"

// IsToken reports whether s is a non-empty RFC 9110 token (methods, header
// names, auth schemes).
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v is a valid field value: visible
// characters, spaces, tabs and obs-text; never CR, LF, NUL, DEL or any
// other control character.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ValidHostHeader reports whether h is made only of the bytes net/http
// accepts in a Host header (httpguts.ValidHostHeader): letters, digits and
// !$%&'()*+,-.:;=[]_~.
func ValidHostHeader(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
