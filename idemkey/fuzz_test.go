package idemkey

import (
	"errors"
	"testing"
)

// FuzzValidate checks that Validate never panics, that it accepts exactly
// the documented syntax, and that every valid key survives FormatHeader then
// ParseHeader in both formats.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"", "a", "ab c", `a"b\c`, `"abc"`, "\x7f", "é", "8e03978e-40d5-43e8-bc93-6894a57f9324"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := Validate(key)
		if got, want := err == nil, validBySpec(key); got != want {
			t.Fatalf("Validate(%q) = %v; want valid = %v", key, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("Validate(%q) = %v; want errors.Is ErrInvalidKey", key, err)
			}
			return
		}
		for _, format := range []Format{FormatToken, FormatStructured} {
			v := FormatHeader(key, format)
			got, err := ParseHeader(v)
			if err != nil || got != key {
				t.Fatalf("ParseHeader(FormatHeader(%q, %v) = %q) = %q, %v; want the key", key, format, v, got, err)
			}
		}
	})
}

// validBySpec restates the accepted syntax independently of Validate.
func validBySpec(key string) bool {
	if len(key) < 1 || len(key) > 255 || key[0] == '"' {
		return false
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7E {
			return false
		}
	}
	return true
}

// FuzzParseHeader checks that ParseHeader never panics, that whatever it
// returns is a valid key, and that the key formats back to a header that
// parses to the same key.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"", "abc", `"abc"`, `"a\"b\\c"`, `"abc`, `"a\bc"`, `"abc";p=1`, ` "x" `, `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := ParseHeader(v)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) || key != "" {
				t.Fatalf("ParseHeader(%q) = %q, %v; want \"\" and an ErrInvalidKey error", v, key, err)
			}
			return
		}
		if err := Validate(key); err != nil {
			t.Fatalf("ParseHeader(%q) = %q, which Validate rejects: %v", v, key, err)
		}
		for _, format := range []Format{FormatToken, FormatStructured} {
			if again, err := ParseHeader(FormatHeader(key, format)); err != nil || again != key {
				t.Fatalf("re-parse of %q in %v = %q, %v; want %q", key, format, again, err, key)
			}
		}
	})
}
