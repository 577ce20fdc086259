package redact

import (
	"net/http"
	"reflect"
	"slices"
	"testing"
)

func TestDefaultsAreFreshCopies(t *testing.T) {
	h := DefaultHeaders()
	h[0] = "X-Changed"
	if got := DefaultHeaders()[0]; got != "Authorization" {
		t.Errorf("DefaultHeaders()[0] after mutating an earlier result = %q, want %q", got, "Authorization")
	}
	p := DefaultParams()
	p[0] = "changed"
	if got := DefaultParams()[0]; got != "api_key" {
		t.Errorf("DefaultParams()[0] after mutating an earlier result = %q, want %q", got, "api_key")
	}
}

func TestIsSensitive(t *testing.T) {
	r := New([]string{"X-Signature", " ", ""}, []string{"Session"})
	var nilR *Redactor
	headers := []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"authorization", true},
		{"PROXY-AUTHORIZATION", true},
		{"Cookie", true},
		{"Set-Cookie", true},
		{"x-api-key", true},
		{"x-signature", true},
		{"Content-Type", false},
		{"", false},
		{"Authorization2", false},
	}
	for _, tt := range headers {
		if got := r.IsSensitiveHeader(tt.name); got != tt.want {
			t.Errorf("IsSensitiveHeader(%q) = %v, want %v", tt.name, got, tt.want)
		}
		wantNil := tt.want // x-signature too: "signature" is a credential's word
		if got := nilR.IsSensitiveHeader(tt.name); got != wantNil {
			t.Errorf("nil.IsSensitiveHeader(%q) = %v, want %v", tt.name, got, wantNil)
		}
	}
	for _, p := range DefaultParams() {
		if !nilR.IsSensitiveParam(p) || !r.IsSensitiveParam(p) {
			t.Errorf("IsSensitiveParam(%q) = false, want true", p)
		}
	}
	params := []struct {
		name string
		want bool
	}{
		{"ACCESS_TOKEN", true},
		{"session", true},
		{"SESSION", true},
		{"page", false},
		{"keys", false},
	}
	for _, tt := range params {
		if got := r.IsSensitiveParam(tt.name); got != tt.want {
			t.Errorf("IsSensitiveParam(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"Authorization", "Bearer sk_live_abc123", "Bearer REDACTED"},
		{"authorization", "Basic dXNlcjpwYXNz", "Basic REDACTED"},
		{"Proxy-Authorization", "Digest username=\"u\", response=\"x\"", "Digest REDACTED"},
		{"Authorization", "  Bearer   tok  ", "Bearer REDACTED"},
		{"Authorization", "sk_live_abc123", "REDACTED"},
		{"Authorization", "Bearer ", "REDACTED"},
		{"Authorization", "Be(arer tok", "REDACTED"},
		{"Authorization", "", ""},
		{"X-Api-Key", "Bearer abc", "REDACTED"},
		{"Cookie", "session=abc; theme=dark", "REDACTED"},
		{"Set-Cookie", "session=abc; Path=/; HttpOnly", "REDACTED"},
		{"Content-Type", "application/json", "application/json"},
		{"X-Custom", "Bearer abc", "Bearer abc"},
	}
	var r *Redactor
	for _, tt := range tests {
		if got := r.HeaderValue(tt.name, tt.value); got != tt.want {
			t.Errorf("HeaderValue(%q, %q) = %q, want %q", tt.name, tt.value, got, tt.want)
		}
	}
}

func TestHeader(t *testing.T) {
	r := New([]string{"X-Secret"}, nil)
	in := http.Header{
		"Authorization": {"Bearer t0ken"},
		"X-Secret":      {"a", "b"},
		"Content-Type":  {"application/json"},
		"X-Empty":       nil,
	}
	orig := in.Clone()
	got := r.Header(in)
	want := http.Header{
		"Authorization": {"Bearer REDACTED"},
		"X-Secret":      {"REDACTED", "REDACTED"},
		"Content-Type":  {"application/json"},
		"X-Empty":       nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Header = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Errorf("input after Header = %v, want it unchanged %v", in, orig)
	}
	got["Content-Type"][0] = "changed"
	if in["Content-Type"][0] != "application/json" {
		t.Errorf("Header result shares value slices with its input")
	}
	if got := r.Header(nil); got != nil {
		t.Errorf("Header(nil) = %v, want nil", got)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		s       string
		secrets []string
		want    string
	}{
		{"auth failed for sk_live_abc: bad", []string{"sk_live_abc"}, "auth failed for REDACTED: bad"},
		{"x abc x abc", []string{"abc"}, "x abc x abc"}, // too short
		{"x abcd x abcd", []string{"abcd"}, "x REDACTED x REDACTED"},
		{"nothing here", []string{"", "secret"}, "nothing here"},
		{"token=abcdefgh", []string{"abcd", "abcdefgh"}, "token=REDACTED"}, // longest wins
		{"token=abcdefgh", []string{"efgh", "abcd"}, "token=REDACTEDREDACTED"},
		{"xabcdy", []string{"abcd", "xREDACTEDy"}, "xREDACTEDy"}, // single pass: the replacement is not rescanned
		{"plain", nil, "plain"},
	}
	var r *Redactor
	for _, tt := range tests {
		if got := r.String(tt.s, tt.secrets...); got != tt.want {
			t.Errorf("String(%q, %q) = %q, want %q", tt.s, tt.secrets, got, tt.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	r := New([]string{"X-Signature"}, []string{"session"})
	h := http.Header{
		"Authorization": {"Basic dXNlcjpzM2NyM3Q="}, // user:s3cr3t
		"Cookie":        {"sid=c00kie; theme=\"dark\""},
		"Set-Cookie":    {"sid=setc00kie; Path=/; HttpOnly"},
		"X-Signature":   {" sig-value "},
		"Content-Type":  {"application/json"},
	}
	got := r.Secrets(h, "https://bob:pa%24s@example.com/p?token=t%2Bk&page=2&Session=sess#access_token=frag")
	want := []string{
		"Basic dXNlcjpzM2NyM3Q=", "dXNlcjpzM2NyM3Q=", "user:s3cr3t", "s3cr3t",
		"sid=c00kie; theme=\"dark\"", "c00kie", "dark",
		"sid=setc00kie; Path=/; HttpOnly", "setc00kie",
		" sig-value ", "sig-value",
		"t%2Bk", "t+k", "sess", "frag",
		"pa%24s", "pa$s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Secrets =\n %q\nwant\n %q", got, want)
	}
	var nilR *Redactor
	if got := nilR.Secrets(nil, ""); len(got) != 0 {
		t.Errorf("Secrets(nil, \"\") = %q, want none", got)
	}
	if got := nilR.Secrets(nil, "http://[::1%zz/?key=k3y-value"); !slices.Equal(got, []string{"k3y-value"}) {
		t.Errorf("Secrets of an unparseable URL = %q, want [k3y-value]", got)
	}
}

// TestSecretsScrubError shows the intended use: an error text that echoes a
// credential is scrubbed with the secrets of the request that caused it.
func TestSecretsScrubError(t *testing.T) {
	var r *Redactor
	h := http.Header{"Authorization": {"Bearer sk_live_9f8e7d"}}
	rawURL := "https://api.example.com/v1?api_key=ak_123456"
	msg := `target said: invalid token "sk_live_9f8e7d" for GET https://api.example.com/v1?api_key=ak_123456`
	got := r.String(msg, r.Secrets(h, rawURL)...)
	want := `target said: invalid token "REDACTED" for GET https://api.example.com/v1?api_key=REDACTED`
	if got != want {
		t.Errorf("scrubbed =\n %s\nwant\n %s", got, want)
	}
}

// Names that look like a credential's are sensitive without being listed;
// ordinary names are not.
func TestSecretLikeNames(t *testing.T) {
	var r *Redactor
	for name, want := range map[string]bool{
		"X-Auth-Token": true, "Api-Key": true, "Private-Token": true, "X-Goog-Api-Key": true,
		"X-Shopify-Access-Token": true, "Ocp-Apim-Subscription-Key": true, "X-Session-Id": true,
		"Content-Type": false, "Accept": false, "X-Request-Id": false, "Key": false, "Keyboard": false,
		"X-Tokenizer": false, "Idempotency-Key": false, "X-Routing-Key": false, "Cache-Key": false,
		"X-Access-Key": true,
	} {
		if got := r.IsSensitiveHeader(name); got != want {
			t.Errorf("IsSensitiveHeader(%q) = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]bool{
		"X-Amz-Signature": true, "X-Amz-Credential": true, "X-Amz-Security-Token": true,
		"auth_token": true, "api-key": true, "private_token": true, "id": false, "amount": false,
		"X-Amz-Date": false, "X-Amz-Expires": false, "idempotency_key": false, "sort_key": false,
		"access_key": true, "client_key": true,
	} {
		if got := r.IsSensitiveParam(name); got != want {
			t.Errorf("IsSensitiveParam(%q) = %v, want %v", name, got, want)
		}
	}
	if got := r.URL("https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc&X-Amz-Date=20261201"); got != "https://b.s3.amazonaws.com/o?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Date=20261201" {
		t.Errorf("presigned URL shown as %s", got)
	}
}

// All hides every header value and every URL parameter value.
func TestAllHidesEverything(t *testing.T) {
	r := All()
	if got := r.URL("https://h/p?a=1&b=two#c=3"); got != "https://h/p?a=REDACTED&b=REDACTED#c=REDACTED" {
		t.Errorf("URL: %s", got)
	}
	if got := r.HeaderValue("X-Plain", "v"); got != Placeholder {
		t.Errorf("HeaderValue: %s", got)
	}
	if got := r.HeaderValue("Authorization", "Bearer sk"); got != "Bearer "+Placeholder {
		t.Errorf("Authorization: %s", got)
	}
	if New(nil, nil).IsSensitiveParam("a") {
		t.Error("a default Redactor hides a parameter called a")
	}
}
