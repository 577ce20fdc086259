package idemkey

import (
	"fmt"
	"strings"
)

// Format is how FormatHeader writes a key into the Idempotency-Key header.
// The zero value is FormatToken.
type Format int

const (
	// FormatToken writes the key as-is: Idempotency-Key: 8e03978e-...
	// It is the default, and what Stripe-style APIs expect.
	FormatToken Format = iota
	// FormatStructured writes the key as a Structured Field string (RFC 8941
	// sf-string), as draft-ietf-httpapi-idempotency-key-header specifies:
	// Idempotency-Key: "8e03978e-...", with \ and " escaped by a backslash.
	FormatStructured
)

// String returns "token" or "structured", the names ParseFormat accepts.
func (f Format) String() string {
	switch f {
	case FormatToken:
		return "token"
	case FormatStructured:
		return "structured"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat returns the Format named s: "token" or "structured", in any
// letter case. Any other value, including "", is an error.
func ParseFormat(s string) (Format, error) {
	switch {
	case strings.EqualFold(s, "token"):
		return FormatToken, nil
	case strings.EqualFold(s, "structured"):
		return FormatStructured, nil
	}
	return FormatToken, fmt.Errorf("idemkey: unknown header format %q; accepted: token, structured", s)
}

// FormatHeader returns the Idempotency-Key header value for key in format f.
// An unknown f is treated as FormatToken. key should have passed Validate;
// FormatHeader does not check it.
func FormatHeader(key string, f Format) string {
	if f != FormatStructured {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// ParseHeader returns the key carried by an Idempotency-Key header value in
// either format: a value starting with a double quote is read as an sf-string
// (only \\ and \" escapes, nothing after the closing quote, so no
// parameters), anything else as the bare key. Surrounding spaces and tabs
// are ignored. The key must pass Validate. Errors are *InvalidKeyError.
func ParseHeader(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if v == "" || v[0] != '"' {
		if err := Validate(v); err != nil {
			return "", err
		}
		return v, nil
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
				return "", invalid(v, fmt.Sprintf("structured form: invalid escape at byte %d (only \\\\ and \\\" are allowed)", i))
			}
			i++
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", invalid(v, fmt.Sprintf("structured form: unexpected characters after the closing quote at byte %d", i))
			}
			key := b.String()
			if err := Validate(key); err != nil {
				return "", err
			}
			return key, nil
		case c < 0x20 || c > 0x7E:
			return "", invalid(v, fmt.Sprintf("structured form: invalid byte 0x%02X at byte %d", c, i))
		default:
			b.WriteByte(c)
		}
	}
	return "", invalid(v, "structured form: missing closing quote")
}
