package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no query", "https://api.example.com/v1/pay", "https://api.example.com/v1/pay"},
		{"plain query kept byte-identical", "https://h/p?b=2&a=%41+x&c", "https://h/p?b=2&a=%41+x&c"},
		{"sensitive param", "https://h/p?page=2&api_key=abc123&z=1", "https://h/p?page=2&api_key=REDACTED&z=1"},
		{"case-insensitive name", "https://h/p?Access_Token=abc&x=1", "https://h/p?Access_Token=REDACTED&x=1"},
		{"escaped name", "https://h/p?%74oken=abc", "https://h/p?%74oken=REDACTED"},
		{"repeated param", "https://h/?sig=a&sig=b", "https://h/?sig=REDACTED&sig=REDACTED"},
		{"empty value kept", "https://h/?token=&x=1", "https://h/?token=&x=1"},
		{"name without value", "https://h/?token&x=1", "https://h/?token&x=1"},
		{"value with equals", "https://h/?signature=a=b==", "https://h/?signature=REDACTED"},
		{"fragment params", "https://h/cb#access_token=abc&state=s", "https://h/cb#access_token=REDACTED&state=s"},
		{"fragment plain", "https://h/doc#section-2", "https://h/doc#section-2"},
		{"query and fragment", "https://h/?key=k#token=t", "https://h/?key=REDACTED#token=REDACTED"},
		// The pair's name is "a?token": it holds a credential's word.
		{"question mark in fragment", "https://h/#a?token=t", "https://h/#a?token=REDACTED"},
		{"userinfo password", "https://bob:hunter2@h/p?x=1", "https://bob:REDACTED@h/p?x=1"},
		{"userinfo user only", "https://bob@h/p", "https://bob@h/p"},
		{"userinfo empty password", "https://bob:@h/p", "https://bob:@h/p"},
		{"scheme-relative userinfo", "//bob:pw@h/p", "//bob:REDACTED@h/p"},
		{"escaped password", "https://bob:p%40ss@h/", "https://bob:REDACTED@h/"},
		{"colon in path not userinfo", "https://h/a:b@c", "https://h/a:b@c"},
		{"at sign in query", "https://h/p?email=a:b@c", "https://h/p?email=a:b@c"},
		{"relative", "/v1/pay?token=abc", "/v1/pay?token=REDACTED"},
		{"only query", "?password=pw", "?password=REDACTED"},
		{"empty", "", ""},
		{"unparseable host", "http://[::1%zz/p?page=1&token=abc", "http://[::1%zz/p?REDACTED"},
		{"unparseable control char", "https://h/p\x7f?page=1", "https://h/p\x7f?REDACTED"},
		{"unparseable fragment", "http://[bad#access_token=x", "http://[bad#REDACTED"},
		{"unparseable with password", "http://bob:pw@[bad/?x=1", "http://bob:REDACTED@[bad/?REDACTED"},
		{"at sign in password", "http://bob:p@ss@h/?x=1", "http://bob:REDACTED@h/?x=1"},
		{"unparseable no query", "http://[bad", "http://[bad"},
		{"opaque", "mailto:a@b?token=t", "mailto:a@b?token=REDACTED"},
	}
	var nilR *Redactor
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nilR.URL(tt.in); got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestURLExtraParams(t *testing.T) {
	r := New(nil, []string{"X-Amz-Credential", "session"})
	in := "https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIA%2F2024&x-amz-date=1&SESSION=s"
	want := "https://b.s3.amazonaws.com/o?X-Amz-Credential=REDACTED&x-amz-date=1&SESSION=REDACTED"
	if got := r.URL(in); got != want {
		t.Errorf("URL(%q) = %q, want %q", in, got, want)
	}
}

// A URL with no query, fragment or userinfo is returned as it is, parsed
// or not (URL skips parsing it): nothing in it can be a secret's value.
func TestURLWithoutQueryFragmentOrUserinfoIsUnchanged(t *testing.T) {
	for _, raw := range []string{
		"https://api.example.com/v1/payments",
		"http://127.0.0.1:8080/payments/{key}",
		"http://[::1%zz/p",
		"https://h/p%zz",
		"/relative/path",
		"",
		"https://h/p\x7f",
	} {
		if got := New(nil, nil).URL(raw); got != raw {
			t.Errorf("URL(%q) = %q, want it unchanged", raw, got)
		}
	}
	// With a userinfo password it is not skipped.
	if got := New(nil, nil).URL("http://bob:pw@h/p"); got != "http://bob:"+Placeholder+"@h/p" {
		t.Errorf("URL with a password = %q, want it hidden", got)
	}
}

// Parameters after a ';' (which many servers take as a separator, as Go's
// net/url did before 1.17) are redacted by their own names; a sensitive
// value runs to the next '&', since where ';' does not separate it is part
// of that value. Before, "?a=1;token=T" showed T (found by a probe).
func TestURLSemicolonSeparators(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h/p?a=1;token=T0k3n", "https://h/p?a=1;token=REDACTED"},
		{"https://h/p?a=1;token=T0k3n;b=2&c=3", "https://h/p?a=1;token=REDACTED&c=3"},
		{"https://h/p?token=abc;def&c=3", "https://h/p?token=REDACTED&c=3"},
		{"https://h/p?x=1;y=2&sig=s1g;z", "https://h/p?x=1;y=2&sig=REDACTED"},
		{"https://h/cb#state=s;access_token=at", "https://h/cb#state=s;access_token=REDACTED"},
		{"https://h/p?a=b;c=d", "https://h/p?a=b;c=d"},
		{"https://h/p?token=;x=1", "https://h/p?token=REDACTED"},
		{"https://h/p?a=1;token=", "https://h/p?a=1;token="},
	}
	var r *Redactor
	for _, tt := range tests {
		if got := r.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := r.URL(tt.want); got != tt.want {
			t.Errorf("URL(%q) = %q: not idempotent", tt.want, got)
		}
	}
	secs := r.Secrets(nil, "https://h/p?a=1;token=T0k3n;b=2&c=3")
	if got := r.String("sent a=1;token=T0k3n;b=2", secs...); strings.Contains(got, "T0k3n") {
		t.Errorf("String with Secrets of a ;-separated token = %q (secrets %q)", got, secs)
	}
}

// Path parameters (/app;jsessionid=…, where Java servers put the session)
// are redacted by their names, each value to the end of its segment; the
// authority's ';' (userinfo) is not a path parameter.
func TestURLPathParams(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h/app;jsessionid=ABC123/x?y=1", "https://h/app;jsessionid=REDACTED/x?y=1"},
		{"https://h/a;v=1/b", "https://h/a;v=1/b"},
		{"https://h/a;v=1;token=t0k/b;x", "https://h/a;v=1;token=REDACTED/b;x"},
		{"https://h/a;token=", "https://h/a;token="},
		{"/rel;sessionid=S3ss", "/rel;sessionid=REDACTED"},
		{"http://[bad/app;jsessionid=ABC123?q", "http://[bad/app;jsessionid=REDACTED?REDACTED"},
		{"https://u;token=x@h/p", "https://u;token=x@h/p"},
		{"https://h;token=x", "https://h;token=x"},
	}
	var r *Redactor
	for _, tt := range tests {
		if got := r.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := r.URL(tt.want); got != tt.want {
			t.Errorf("URL(%q) = %q: not idempotent", tt.want, got)
		}
	}
	u := "https://h/app;jsessionid=ABC123/x"
	if got := r.String("GET "+u+" failed", r.Secrets(nil, u)...); got != "GET https://h/app;jsessionid=REDACTED/x failed" {
		t.Errorf("String with Secrets of a path parameter = %q", got)
	}
}
