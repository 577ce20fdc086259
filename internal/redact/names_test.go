package redact

import (
	"net/http"
	"strings"
	"testing"
)

// The name rules cover credentials' names by their words, not by a list:
// every spelling of authentication, JWTs, passphrases, compound words
// (csrftoken, xapikey, phpsessid) and keys of the kinds that are secret.
// Authentication, X-JWT and X-Passphrase were shown in clear before (found
// by a probe).
func TestSecretLikeNamesByRule(t *testing.T) {
	var r *Redactor
	const sec = "s3cretVal9"
	for _, name := range []string{
		"Authentication", "X-Authentication", "X-Authn", "X-Authz", "X-JWT", "X-Jwt-Assertion", "X-Goog-Iap-Jwt-Assertion",
		"X-Passphrase", "X-Key-Passphrase", "X-User-Password", "X-Userpassword", "X-CSRFToken", "X-Csrftoken", "X-Oauth",
		"X-Accesstoken", "XAPIKEY", "X-Apikey", "DD-APPLICATION-KEY", "X-Functions-Key", "X-Service-Key", "X-Otp", "X-Totp",
		"X-Hub-Signature-256", "X-Vault-Token", "X-Sessionid", "X-Client-Assertion", "X-Hmac", "X-Hmac-Sha256",
	} {
		if !r.IsSensitiveHeader(name) {
			t.Errorf("IsSensitiveHeader(%q) = false, want true", name)
		}
		if got := r.Header(http.Header{name: {sec}}); strings.Contains(strings.Join(got[name], ""), sec) {
			t.Errorf("Header(%s) = %v: value shown", name, got)
		}
	}
	for _, name := range []string{
		"jwt", "id_token", "passphrase", "PHPSESSID", "jsessionid", "client_assertion", "oauth_signature", "otp",
		"authentication", "apiKey", "accessKey", "X-Goog-Signature", "sessionToken",
	} {
		if !r.IsSensitiveParam(name) {
			t.Errorf("IsSensitiveParam(%q) = false, want true", name)
		}
		if u := "https://h/p?" + name + "=" + sec; strings.Contains(r.URL(u), sec) {
			t.Errorf("URL(%s) = %s: value shown", u, r.URL(u))
		}
	}
	// Names that only share letters with a credential's word.
	for _, name := range []string{
		"Author", "X-Authority", "X-Tokenizer", "Keyboard", "Monkey", "X-Hotkey", "Idempotency-Key", "X-Routing-Key",
		"Cache-Key", "X-Request-Id", "Content-Type", "Accept", "X-Forwarded-For", "X-Pass-Through", "Bypass", "keyId",
		"X-Amz-Date", "page", "sort_key", "X-Topic", "Expires",
	} {
		if r.IsSensitiveHeader(name) || r.IsSensitiveParam(name) {
			t.Errorf("%q is sensitive; want it shown", name)
		}
	}
}
