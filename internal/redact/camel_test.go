package redact

import (
	"net/http"
	"strings"
	"testing"
)

// camelCase credential names are as sensitive as their snake_case and
// kebab-case spellings; names that only look alike are not.
func TestCamelCaseNames(t *testing.T) {
	var r *Redactor
	const sec = "s3cretVal9"
	for _, name := range []string{"accessToken", "authToken", "apiToken", "refreshToken", "clientSecret", "sessionToken", "idToken", "accessKey", "XAuthToken", "APIKey", "x-api-key", "client_secret"} {
		u := "https://api.example.com/cb?" + name + "=" + sec
		if got := r.URL(u); strings.Contains(got, sec) {
			t.Errorf("URL(%q) = %q: value shown", u, got)
		}
		h := http.Header{"X-" + name: {sec}}
		if got := r.Header(h); strings.Contains(strings.Join(got["X-"+name], ""), sec) {
			t.Errorf("Header(X-%s) = %v: value shown", name, got)
		}
	}
	for _, name := range []string{"idempotencyKey", "sortKey", "author", "monkey", "keyId", "page"} {
		if r.IsSensitiveParam(name) {
			t.Errorf("IsSensitiveParam(%q) = true; want false", name)
		}
	}
}
