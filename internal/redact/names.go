package redact

import "strings"

// The name rules: a header or parameter name is a credential's when one of
// its words (split as secretLike says) is one by the rules below. They go
// by words and parts of words, not by a list of whole names, so spellings
// nobody listed (X-Goog-Iap-Jwt-Assertion, X-CSRFToken, PHPSESSID) are
// covered too.

// secretWords are the words that are a credential's on their own.
var secretWords = map[string]bool{
	"token": true, "secret": true, "password": true, "passwd": true, "pwd": true, "passphrase": true,
	"credential": true, "credentials": true, "signature": true, "jwt": true, "assertion": true,
	"auth": true, "authn": true, "authz": true, "authorization": true, "authentication": true,
	"session": true, "sessid": true, "cookie": true, "apikey": true, "otp": true, "hmac": true,
}

// secretStems make any word that contains them a credential's: compounds
// such as userpassword, clientsecret, jsessionid, setcookie. Stems that
// ordinary words contain too (token in tokenizer, auth in author) are in
// secretSuffixes instead.
var secretStems = []string{"secret", "passw", "passphrase", "credential", "signature", "jwt", "session", "sessid", "cookie", "apikey"}

// secretSuffixes make a word that ends with them a credential's:
// accesstoken, csrftoken, oauth, basicauth, totp.
var secretSuffixes = []string{"token", "auth", "authn", "authz", "authorization", "authentication", "pwd", "otp", "hmac"}

// keyKinds are the words that make a following "key" a credential
// (X-Goog-Api-Key, Ocp-Apim-Subscription-Key, DD-Application-Key,
// access_key, and run together: apikey, accesskey); other keys
// (idempotency_key, sort_key, X-Routing-Key, hotkey) are not.
var keyKinds = []string{
	"api", "access", "secret", "private", "subscription", "client", "signing", "master", "encryption", "license",
	"app", "application", "function", "functions", "service", "account", "shared", "admin", "auth", "personal",
}

// secretLike reports whether a name has a credential's word by the rules
// above, or "key" after a key kind (not a bare "key", which only the lists
// name). Words are split at anything but letters and digits and where a
// lower-case letter or digit meets an upper-case one, so camelCase names
// (accessToken, clientSecret, accessKey) split as their writers meant.
func secretLike(name string) bool {
	prev := ""
	start := -1
	for i := 0; i <= len(name); i++ {
		var c byte
		if i < len(name) {
			c = name[i]
		}
		lower := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		upper := c >= 'A' && c <= 'Z'
		if start >= 0 && (!(lower || upper) || upper && i > 0 && isLowerOrDigit(name[i-1])) {
			w := strings.ToLower(name[start:i])
			if secretWord(w) || w == "key" && isKeyKind(prev) {
				return true
			}
			prev = w
			start = -1
		}
		if start < 0 && (lower || upper) {
			start = i
		}
	}
	return false
}

// secretWord reports whether the lower-case word w is a credential's by
// itself.
func secretWord(w string) bool {
	if secretWords[w] {
		return true
	}
	for _, s := range secretStems {
		if strings.Contains(w, s) {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if len(w) > len(s) && strings.HasSuffix(w, s) {
			return true
		}
	}
	// A key kind and "key" run together: xapikey, accesskey, secretkey.
	if before, ok := strings.CutSuffix(w, "key"); ok {
		for _, k := range keyKinds {
			if strings.HasSuffix(before, k) {
				return true
			}
		}
	}
	return false
}

func isKeyKind(w string) bool {
	for _, k := range keyKinds {
		if w == k {
			return true
		}
	}
	return false
}

func isLowerOrDigit(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
