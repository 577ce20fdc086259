package api_test

import (
	"testing"

	"github.com/idemrun/idemrun/api"
)

// An admin enqueue body naming status_url twice, once with U+017F (ſ) for
// the s: refused as a field given twice (encoding/json would let the second
// spelling win).
func TestAdminBodyLongSDuplicateRefused(t *testing.T) {
	body := `{"method":"POST","url":"http://127.0.0.1:1/pay","status_url":"http://good/{key}","ſtatus_url":"http://evil/{key}"}`
	w, err := api.DecodeEnqueue([]byte(body))
	if err == nil {
		t.Errorf("DecodeEnqueue accepted a duplicate field; status_url=%q", w.StatusURL)
	}
}
