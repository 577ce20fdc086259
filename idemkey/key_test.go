package idemkey

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/uuid"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		reason string // "" means valid
	}{
		{"uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", ""},
		{"single char", "a", ""},
		{"max length", strings.Repeat("k", 255), ""},
		{"all printable ASCII but quote first", "!" + printableASCII(), ""},
		{"quote inside", `a"b`, ""},
		{"backslash", `a\b`, ""},
		{"tilde and bang", "~!", ""},
		{"empty", "", "empty"},
		{"one over max", strings.Repeat("k", 256), "too long: 256 bytes, max 255"},
		{"far over max", strings.Repeat("k", 10000), "too long: 10000 bytes, max 255"},
		{"space", "ab c", "contains a space at byte 2"},
		{"leading space", " abc", "contains a space at byte 0"},
		{"trailing space", "abc ", "contains a space at byte 3"},
		{"tab", "ab\tc", "contains control character 0x09 at byte 2"},
		{"newline", "abc\n", "contains control character 0x0A at byte 3"},
		{"carriage return", "a\rb", "contains control character 0x0D at byte 1"},
		{"NUL", "\x00", "contains control character 0x00 at byte 0"},
		{"DEL", "abc\x7f", "contains control character 0x7F at byte 3"},
		{"non-ASCII UTF-8", "clé", "contains non-ASCII byte 0xC3 at byte 2"},
		{"invalid UTF-8", "a\xff", "contains non-ASCII byte 0xFF at byte 1"},
		{"leading double quote", `"abc"`, "starts with a double quote, which reads as the structured header form"},
		{"only a double quote", `"`, "starts with a double quote, which reads as the structured header form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.key)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Validate(%q) = %v, want nil", tt.key, err)
				}
				return
			}
			var ike *InvalidKeyError
			if !errors.As(err, &ike) {
				t.Fatalf("Validate(%q) = %v (%T), want *InvalidKeyError", tt.key, err, err)
			}
			if ike.Reason != tt.reason {
				t.Errorf("Reason = %q, want %q", ike.Reason, tt.reason)
			}
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("errors.Is(%v, ErrInvalidKey) = false, want true", err)
			}
		})
	}
}

func printableASCII() string {
	var b []byte
	for c := byte(0x21); c <= 0x7E; c++ {
		b = append(b, c)
	}
	return string(b)
}

func TestInvalidKeyErrorMessage(t *testing.T) {
	tests := []struct {
		key  string
		want string
	}{
		{"ab c", `idemkey: invalid key "ab c": contains a space at byte 2; accepted: ` + Accepted},
		{"", `idemkey: invalid key "": empty; accepted: ` + Accepted},
		{"é\x00", `idemkey: invalid key "\u00e9\x00": contains non-ASCII byte 0xC3 at byte 0; accepted: ` + Accepted},
		{strings.Repeat("x", 300), `idemkey: invalid key "` + strings.Repeat("x", 40) + `"...: too long: 300 bytes, max 255; accepted: ` + Accepted},
	}
	for _, tt := range tests {
		got := Validate(tt.key).Error()
		if got != tt.want {
			t.Errorf("Validate(%.20q).Error():\n got %s\nwant %s", tt.key, got, tt.want)
		}
	}
	if !strings.Contains(Accepted, "1-255 printable ASCII characters (0x21-0x7E)") {
		t.Errorf("Accepted = %q, want it to state the accepted characters", Accepted)
	}
}

func TestNew(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		k := New()
		if err := Validate(k); err != nil {
			t.Fatalf("Validate(New()) = %v", err)
		}
		u, err := uuid.Parse(k)
		if err != nil {
			t.Fatalf("uuid.Parse(%q) = %v", k, err)
		}
		if got := u.Version(); got != 4 {
			t.Fatalf("version of %q = %d, want 4", k, got)
		}
		if got := u.Variant(); got != uuid.RFC4122 {
			t.Fatalf("variant of %q = %v, want RFC4122", k, got)
		}
		if seen[k] {
			t.Fatalf("New() returned %q twice", k)
		}
		seen[k] = true
	}
}

func TestNewFromReader(t *testing.T) {
	got, err := NewFromReader(bytes.NewReader(bytes.Repeat([]byte{0xAB}, 16)))
	if err != nil {
		t.Fatalf("NewFromReader: %v", err)
	}
	if want := "abababab-abab-4bab-abab-abababababab"; got != want {
		t.Errorf("NewFromReader = %q, want %q", got, want)
	}
	_, err = NewFromReader(iotest.ErrReader(errors.New("boom")))
	if err == nil || !strings.HasPrefix(err.Error(), "idemkey: ") {
		t.Errorf("NewFromReader(failing reader) = %v, want an idemkey error", err)
	}
}
