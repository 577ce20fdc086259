package api_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// Sensitive names an application gives the Go API stay redacted for every
// later open of the file with no options of its own — what `idemrun show`
// and a runner's admin API do. Before, the names lived only in the
// application's Client, and the CLI showed those values in clear (found
// in a contract review).
func TestConfiguredSensitiveNamesAreRecordedInTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	const pin, param = "pin-4711-planted", "prm-4711-planted"
	c, err := api.Open(path, &api.Options{
		SensitiveHeaders: []string{"X-Merchant-Pin"},
		SensitiveParams:  []string{"merchant_pin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, api.Request{Method: "POST", URL: "http://127.0.0.1:9/p?merchant_pin=" + param,
		Header: []api.Header{{Name: "X-Merchant-Pin", Value: pin}}}, api.EnqueueOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	leaks := func(j *api.Job) []string {
		var out []string
		if strings.Contains(j.URL, param) {
			out = append(out, "url "+j.URL)
		}
		for _, h := range j.Headers {
			if strings.Contains(h.Value, pin) {
				out = append(out, h.Name+": "+h.Value)
			}
		}
		return out
	}
	if l := leaks(res.Job); len(l) > 0 {
		t.Fatalf("same process: shown in clear: %v", l)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*api.Options{nil, {ReadOnly: true}, {SensitiveHeaders: []string{"X-Other"}}} {
		c2, err := api.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		j, err := c2.Get(ctx, "k1")
		if err != nil {
			t.Fatal(err)
		}
		if l := leaks(j); len(l) > 0 {
			t.Errorf("reopened with %+v: shown in clear: %v", o, l)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The name added by the third open is recorded too.
	c3, err := api.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	hs, ps, err := c3.Store().SensitiveNames()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(hs, ",") != "x-merchant-pin,x-other" || strings.Join(ps, ",") != "merchant_pin" {
		t.Errorf("recorded names: headers %q, params %q; want [x-merchant-pin x-other] and [merchant_pin]", hs, ps)
	}
}
