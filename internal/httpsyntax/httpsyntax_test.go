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

func TestValidHostHeader(t *testing.T) {
	for h, want := range map[string]bool{
		"api.example.com": true, "api.example.com:8443": true, "[::1]:443": true, "[fe80::1%25eth0]": true, "": true,
		"bad\nhost": false, "a b": false, "a/b": false, "a@b": false, "h\x00": false, "café": false,
	} {
		if got := ValidHostHeader(h); got != want {
			t.Errorf("ValidHostHeader(%q) = %v, want %v", h, got, want)
		}
	}
}
