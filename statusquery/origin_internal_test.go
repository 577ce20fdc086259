package statusquery

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, job string
		want        bool
	}{
		{"http://example.com/ops/k", "http://example.com/pay", true},
		{"http://example.com/ops/k", "http://EXAMPLE.com:80/pay", true},
		{"https://example.com:443/ops/k", "https://example.com/pay", true},
		{"https://example.com/ops/k", "HTTPS://Example.Com:443", true},
		{"http://example.com:080/ops/k", "http://example.com/pay", true},
		{"http://[::1]:80/ops/k", "http://[::1]/pay", true},
		{"http://127.0.0.1:8080/ops/k", "http://user:pw@127.0.0.1:8080/pay", true},

		{"http://example.com:8080/ops/k", "http://example.com/pay", false},
		{"http://example.com/ops/k", "http://example.com:8080/pay", false},
		{"http://example.com/ops/k", "https://example.com/pay", false},
		{"https://example.com:80/ops/k", "http://example.com:80/pay", false},
		{"http://example.com:443/ops/k", "https://example.com/pay", false},
		{"http://127.0.0.1/ops/k", "http://127.0.0.2/pay", false},
		{"http://example.com./ops/k", "http://example.com/pay", false},
		{"http://api.example.com/ops/k", "http://example.com/pay", false},
		{"http://kexample.com/ops/k", "http://\u212Aexample.com/pay", false},
		{"http://example.com/ops/k", "", false},
		{"http://example.com/ops/k", "/pay", false},
		{"http://example.com/ops/k", "example.com/pay", false},
		{"http://example.com/ops/k", "http://example.com:x/pay", false},
		{"http://example.com/ops/k", "http://example.com:99999/pay", false},
		{"ftp://example.com/ops/k", "ftp://example.com/pay", false},
	} {
		u, err := url.Parse(tc.status)
		if err != nil {
			t.Fatalf("url.Parse(%q) error = %v", tc.status, err)
		}
		if got := sameOrigin(u, tc.job); got != tc.want {
			t.Errorf("sameOrigin(%q, %q) = %v; want %v", tc.status, tc.job, got, tc.want)
		}
	}
	if sameOrigin(nil, "http://example.com") {
		t.Errorf("sameOrigin(nil, ...) = true; want false")
	}
}

func TestCopyHeaders(t *testing.T) {
	t.Parallel()
	src := http.Header{
		"Authorization":   {"a1", "a2"},
		"cookie":          {"c"},
		"Idempotency-Key": {"k"},
	}
	dst := http.Header{"Accept": {"application/json"}}
	copyHeaders(dst, src, []string{"authorization", "Cookie", "Cookie"})
	want := http.Header{
		"Accept":        {"application/json"},
		"Authorization": {"a1", "a2"},
		"Cookie":        {"c"},
	}
	if len(dst) != len(want) {
		t.Fatalf("copyHeaders gave %v; want %v", dst, want)
	}
	for k, vs := range want {
		if got := dst.Values(k); !slices.Equal(got, vs) {
			t.Errorf("copyHeaders gave %s = %q; want %q", k, got, vs)
		}
	}
}
