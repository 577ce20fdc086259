package api_test

import (
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// A refused key's error says which rule refused it: a key starting with a
// double quote is made of accepted characters, and the message used to
// list only the character rules (found in a contract review).
func TestRefusedKeySaysWhy(t *testing.T) {
	for key, want := range map[string]string{
		`"q`:   "double quote",
		"a b":  "space at byte 1",
		"a\tb": "control character 0x09",
	} {
		_, err := api.Validate(api.Request{Method: "POST", URL: "http://127.0.0.1:9/p"}, api.EnqueueOptions{Key: key}, nil)
		if err == nil {
			t.Errorf("key %q accepted", key)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not starting with a double quote") {
			t.Errorf("key %q: %v; want the reason (%q) and the whole rule", key, err, want)
		}
	}
}
