package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
)

// A client's own sensitive parameter names (Options.SensitiveParams) hide
// values in the errors that refuse a URL too, not only the default names:
// an invalid job URL and an invalid status URL template both carry the
// value, and neither error may show it.
func TestRefusedURLErrorsHideExtraSensitiveParams(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{SensitiveParams: []string{"x-sig"}})
	ctx := context.Background()
	const secret = "sEcReT7781"
	cases := []struct {
		name string
		req  api.Request
		opts api.EnqueueOptions
	}{
		// A space makes the job URL invalid.
		{"job url", api.Request{URL: "http://127.0.0.1:9/pay now?x-sig=" + secret}, api.EnqueueOptions{}},
		// No {key} or {id}: the status URL template is refused.
		{"status url", api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{StatusURL: "http://127.0.0.1:9/status?x-sig=" + secret}},
		// Not UTF-8: refused before the template is parsed.
		{"status url not utf-8", api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{StatusURL: "http://127.0.0.1:9/s/{key}?x-sig=" + secret + "\xff"}},
	}
	for _, tc := range cases {
		_, err := c.Enqueue(ctx, tc.req, tc.opts)
		if err == nil {
			t.Errorf("%s: Enqueue accepted it, want a refusal", tc.name)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the x-sig value: %v", tc.name, err)
		}
		if !strings.Contains(err.Error(), "REDACTED") {
			t.Errorf("%s: the error does not show the value as hidden: %v", tc.name, err)
		}
	}
}
