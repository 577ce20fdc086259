package redact

import (
	"strings"
	"testing"
)

// FuzzURL builds a URL from fuzzed parts with one sensitive parameter
// planted last, and checks that URL never panics, never shows the planted
// value, and is idempotent.
func FuzzURL(f *testing.F) {
	f.Add("https://api.example.com/v1/pay", "page=2", uint8(0), "abc123XYZ", false)
	f.Add("http://bob:pw@h", "", uint8(3), "t0k", true)
	f.Add("http://[::1%zz", "a=b", uint8(5), "s%41g", false)
	f.Add("https://h/cb#frag", "state=s", uint8(2), "acc3ss", false)
	f.Add("/relative", "x=1#y", uint8(10), "k3y", true)
	f.Add("https://h/p\x7f", "", uint8(7), "pw123", false)
	params := DefaultParams()
	f.Fuzz(func(t *testing.T, prefix, query string, which uint8, secret string, upper bool) {
		r := New(nil, nil)
		// Any input: no panic, idempotent.
		for _, raw := range []string{prefix, prefix + "?" + query, secret} {
			once := r.URL(raw)
			if twice := r.URL(once); twice != once {
				t.Fatalf("URL not idempotent on %q: once %q, twice %q", raw, once, twice)
			}
		}

		// Planted value: keep the unreserved characters and %, so the value
		// cannot end its own pair or join text around a placeholder.
		secret = strings.Map(func(c rune) rune {
			switch {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.ContainsRune("-._~%", c):
				return c
			}
			return -1
		}, secret)
		name := params[int(which)%len(params)]
		if upper {
			name = strings.ToUpper(name)
		}
		sep := "?"
		if strings.ContainsAny(prefix, "?#") {
			sep = "&"
		}
		raw := prefix + sep + query + "&" + name + "=" + secret
		if secret == "" || strings.Count(raw, secret) != 1 || strings.Contains(Placeholder, secret) {
			return
		}
		if got := r.URL(raw); strings.Contains(got, secret) {
			t.Fatalf("URL(%q) = %q, which shows the planted value %q", raw, got, secret)
		}
	})
}
