package httpsyntax

import "testing"

func TestIsToken(t *testing.T) {
	for s, want := range map[string]bool{
		"POST": true, "X-Trace": true, "a!#$%&'*+-.^_`|~9": true,
		"": false, "Bad Name": false, "a:b": false, "a\r\nb": false, "é": false, "a/b": false,
	} {
		if got := IsToken(s); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidHeaderValue(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "Bearer x": true, "a\tb": true, "caf\xc3\xa9": true,
		"a\r\nb": false, "a\nb": false, "a\x00b": false, "a\x7fb": false, "a\x01b": false,
	} {
		if got := ValidHeaderValue(s); got != want {
			t.Errorf("ValidHeaderValue(%q) = %v, want %v", s, got, want)
		}
	}
}
