package idemkey

import (
	"net/http"
	"strings"
	"testing"
)

func baseHeader() http.Header {
	return http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json"},
		"X-Tenant":     {"a", "b"},
	}
}

const (
	fpMethod = "POST"
	fpURL    = "https://api.example.com/v1/payments?expand=charge"
)

var fpBody = []byte(`{"amount":100,"currency":"eur"}`)

// TestFingerprintGolden pins the encoding: fingerprints are stored, so a
// change here breaks comparison with fingerprints written by older versions.
func TestFingerprintGolden(t *testing.T) {
	got := Fingerprint(fpMethod, fpURL, baseHeader(), fpBody)
	want := "sha256:" + goldenFingerprintHex
	if got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
	if !strings.HasPrefix(got, "sha256:") || len(got) != len("sha256:")+64 {
		t.Errorf("Fingerprint = %q, want sha256: and 64 hex digits", got)
	}
}

// goldenFingerprintHex was computed independently (Python hashlib) from the
// encoding documented on Fingerprint.
const goldenFingerprintHex = "a5371310c20c2916743746d109f86d5b1e7a084ffa434d223029a926b58ac61e"

func TestFingerprintStable(t *testing.T) {
	want := Fingerprint(fpMethod, fpURL, baseHeader(), fpBody)
	for i := range 200 { // map iteration order varies between calls
		if got := Fingerprint(fpMethod, fpURL, baseHeader(), fpBody); got != want {
			t.Fatalf("call %d: Fingerprint = %s, want %s", i, got, want)
		}
	}
	tests := []struct {
		name   string
		method string
		h      http.Header
	}{
		{"method case", "post", baseHeader()},
		{"mixed method case", "PoSt", baseHeader()},
		{"header names in another insertion order", fpMethod, http.Header{
			"X-Tenant":     {"a", "b"},
			"Accept":       {"application/json"},
			"Content-Type": {"application/json"},
		}},
		{"non-canonical name", fpMethod, func() http.Header {
			h := baseHeader()
			delete(h, "Content-Type")
			h["content-type"] = []string{"application/json"}
			return h
		}()},
		{"empty value list", fpMethod, func() http.Header {
			h := baseHeader()
			h["X-Empty"] = nil
			return h
		}()},
	}
	excluded := []string{
		"Idempotency-Key", "X-Idempotency-Key",
		"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key",
		"Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Connection",
		"Date", "Traceparent", "Tracestate", "X-Request-Id", "User-Agent",
	}
	for _, name := range excluded {
		h := baseHeader()
		h.Set(name, "volatile-"+name)
		tests = append(tests, struct {
			name   string
			method string
			h      http.Header
		}{"excluded " + name, fpMethod, h})
		h2 := baseHeader()
		h2[strings.ToLower(name)] = []string{"other"}
		tests = append(tests, struct {
			name   string
			method string
			h      http.Header
		}{"excluded lower-case " + name, fpMethod, h2})
	}
	for _, tt := range tests {
		if got := Fingerprint(tt.method, fpURL, tt.h, fpBody); got != want {
			t.Errorf("%s: Fingerprint = %s, want %s (unchanged)", tt.name, got, want)
		}
	}
}

func TestFingerprintSensitive(t *testing.T) {
	base := Fingerprint(fpMethod, fpURL, baseHeader(), fpBody)
	flipped := append([]byte(nil), fpBody...)
	flipped[len(flipped)-2] ^= 1
	with := func(f func(h http.Header)) http.Header {
		h := baseHeader()
		f(h)
		return h
	}
	tests := []struct {
		name   string
		method string
		url    string
		h      http.Header
		body   []byte
	}{
		{"body byte", fpMethod, fpURL, baseHeader(), flipped},
		{"body appended", fpMethod, fpURL, baseHeader(), append(append([]byte(nil), fpBody...), ' ')},
		{"nil body", fpMethod, fpURL, baseHeader(), nil},
		{"method", "PUT", fpURL, baseHeader(), fpBody},
		{"url", fpMethod, fpURL + "&x=1", baseHeader(), fpBody},
		{"url case", fpMethod, strings.Replace(fpURL, "payments", "Payments", 1), baseHeader(), fpBody},
		{"value order", fpMethod, fpURL, with(func(h http.Header) { h["X-Tenant"] = []string{"b", "a"} }), fpBody},
		{"value changed", fpMethod, fpURL, with(func(h http.Header) { h.Set("Content-Type", "text/plain") }), fpBody},
		{"header added", fpMethod, fpURL, with(func(h http.Header) { h.Set("X-Extra", "1") }), fpBody},
		{"header removed", fpMethod, fpURL, with(func(h http.Header) { h.Del("Accept") }), fpBody},
		{"empty value added", fpMethod, fpURL, with(func(h http.Header) { h.Add("X-Tenant", "") }), fpBody},
		{"value moved between names", fpMethod, fpURL, with(func(h http.Header) {
			h["X-Tenant"] = []string{"a"}
			h["X-Tenanu"] = []string{"b"}
		}), fpBody},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range tests {
		got := Fingerprint(tt.method, tt.url, tt.h, tt.body)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: Fingerprint = %s, same as %s; want a different fingerprint", tt.name, got, prev)
		}
		seen[got] = tt.name
	}
}

// TestFingerprintUnambiguous checks that moving bytes between fields changes
// the fingerprint, which a plain concatenation would not.
func TestFingerprintUnambiguous(t *testing.T) {
	a := Fingerprint("POST", "https://x/ab", nil, []byte("c"))
	b := Fingerprint("POST", "https://x/a", nil, []byte("bc"))
	if a == b {
		t.Errorf("Fingerprint with bytes moved from URL to body = %s, same as before; want different", b)
	}
	c := Fingerprint("POST", "u", http.Header{"X-A": {"bc"}}, nil)
	d := Fingerprint("POST", "u", http.Header{"X-A": {"b", "c"}}, nil)
	if c == d {
		t.Errorf("Fingerprint with one value split in two = %s, same as before; want different", d)
	}
}
