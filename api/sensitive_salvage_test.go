package api_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// A one-byte damage before a name (here the comma between two names) makes
// salvageNames stop at the damage: every name after it is dropped although
// it is whole and readable, and once the list is rebuilt nothing warns any
// more: X-Z-Pin's values are shown in clear from then on.
// Two applications (or two releases of one) recorded X-A-Pin and X-Z-Pin;
// the list is damaged; one application's open with its own name rebuilds
// it, and X-Z-Pin, still readable in the damaged value, stays. Found in
// two reviews: the list was first replaced by the names given, then
// salvaged only up to the first bad token; either way X-Z-Pin's values
// were shown in clear from then on, with no warning.
func TestDamagedListRebuildKeepsNamesAfterTheDamage(t *testing.T) {
	ctx := context.Background()
	for name, damaged := range map[string]string{
		"tail cut":             `["x-z-pin","x-oth`,
		"comma flipped":        `["x-a-pin"."x-z-pin"]`,
		"byte in first name":   "[\"x-a-p\x01n\",\"x-z-pin\"]",
		"opening bracket lost": `{"x-a-pin","x-z-pin"]`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-A-Pin"}})
			openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Z-Pin"}})
			c, err := api.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/p",
				Header: []api.Header{{Name: "X-Z-Pin", Value: "PIN-PLANTED-2"}}}, api.EnqueueOptions{Key: "k1"}); err != nil {
				t.Fatal(err)
			}
			c.Close()
			putMeta(t, path, "sensitive_headers", damaged)
			openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-A-Pin"}}) // application A rebuilds
			w := openClose(t, path, nil)                                            // the CLI's open
			c, err = api.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			j, err := c.Get(ctx, "k1")
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range j.Headers {
				if strings.Contains(h.Value, "PIN-PLANTED-2") {
					t.Errorf("%s: a whole, readable recorded name was dropped by the rebuild: %s: %s shown in clear (later open's warning: %q)", damaged, h.Name, h.Value, w)
				}
			}
		})
	}
}
