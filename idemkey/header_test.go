package idemkey

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestFormatHeader(t *testing.T) {
	tests := []struct {
		key  string
		f    Format
		want string
	}{
		{"abc", FormatToken, "abc"},
		{"abc", FormatStructured, `"abc"`},
		{`a"b\c`, FormatToken, `a"b\c`},
		{`a"b\c`, FormatStructured, `"a\"b\\c"`},
		{"abc", Format(42), "abc"},
	}
	for _, tt := range tests {
		if got := FormatHeader(tt.key, tt.f); got != tt.want {
			t.Errorf("FormatHeader(%q, %v) = %q, want %q", tt.key, tt.f, got, tt.want)
		}
	}
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		v       string
		want    string
		wantErr string // substring of the error; "" means no error
	}{
		{"abc", "abc", ""},
		{`"abc"`, "abc", ""},
		{`  "abc"	`, "abc", ""},
		{" abc ", "abc", ""},
		{`"a\"b\\c"`, `a"b\c`, ""},
		{`a"b`, `a"b`, ""},
		{`"\"x"`, `"x`, "starts with a double quote"},
		{"", "", "empty"},
		{`""`, "", "empty"},
		{`"abc`, "", "missing closing quote"},
		{`"abc\"`, "", "missing closing quote"},
		{`"abc";p=1`, "", "after the closing quote"},
		{`"a\bc"`, "", "invalid escape at byte 2"},
		{`"abc\`, "", "invalid escape at byte 4"},
		{`"a b"`, "", "contains a space at byte 1"},
		{"\"a\x01b\"", "", "invalid byte 0x01"},
		{"\"a\xc3\xa9\"", "", "invalid byte 0xC3"},
		{"a b", "", "contains a space"},
	}
	for _, tt := range tests {
		got, err := ParseHeader(tt.v)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseHeader(%q) = %q, %v; want %q, nil", tt.v, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseHeader(%q) = %q, %v; want an ErrInvalidKey error containing %q", tt.v, got, err, tt.wantErr)
		}
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		s       string
		want    Format
		wantErr bool
	}{
		{"token", FormatToken, false},
		{"structured", FormatStructured, false},
		{"Structured", FormatStructured, false},
		{"", FormatToken, true},
		{"sf-string", FormatToken, true},
	}
	for _, tt := range tests {
		got, err := ParseFormat(tt.s)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v, error %v", tt.s, got, err, tt.want, tt.wantErr)
		}
	}
	for _, f := range []Format{FormatToken, FormatStructured} {
		if got, err := ParseFormat(f.String()); got != f || err != nil {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v, nil", f.String(), got, err, f)
		}
	}
	if got, want := Format(7).String(), "Format(7)"; got != want {
		t.Errorf("Format(7).String() = %q, want %q", got, want)
	}
	var zero Format
	if zero != FormatToken {
		t.Errorf("zero Format = %v, want FormatToken", zero)
	}
}

// TestHeaderRoundTripProperty checks, over random valid keys biased towards
// the characters that need escaping, that ParseHeader inverts FormatHeader.
func TestHeaderRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const special = `"\`
	for i := range 5000 {
		n := 1 + rng.IntN(MaxLen)
		b := make([]byte, n)
		for j := range b {
			if rng.IntN(4) == 0 {
				b[j] = special[rng.IntN(len(special))]
			} else {
				b[j] = byte(0x21 + rng.IntN(0x7E-0x21+1))
			}
		}
		if b[0] == '"' {
			b[0] = 'k'
		}
		key := string(b)
		if err := Validate(key); err != nil {
			t.Fatalf("case %d: generated key %q is invalid: %v", i, key, err)
		}
		for _, f := range []Format{FormatToken, FormatStructured} {
			v := FormatHeader(key, f)
			got, err := ParseHeader(v)
			if err != nil || got != key {
				t.Fatalf("case %d: ParseHeader(FormatHeader(%q, %v) = %q) = %q, %v; want the key", i, key, f, v, got, err)
			}
		}
	}
}
