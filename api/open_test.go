package api_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/bolt/bolttest"
)

// Defaults every Enqueue would refuse are refused by Open, naming the
// option, and nothing is created.
func TestOpenRefusesBadDefaults(t *testing.T) {
	t.Parallel()
	for _, o := range []api.Options{
		{DefaultMaxAttempts: 500},
		{DefaultDeadline: 365 * 24 * time.Hour},
		{DefaultAttemptTimeout: time.Hour},
	} {
		path := filepath.Join(t.TempDir(), "d.db")
		c, err := api.Open(path, &o)
		if err == nil {
			c.Close()
			t.Errorf("Open(%+v) = nil error, want a refusal", o)
			continue
		}
		if !strings.Contains(err.Error(), "invalid Default") {
			t.Errorf("Open(%+v) = %v, want an error naming the option", o, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("refused Open created %s", path)
		}
	}
}

// Options.ReadOnly: "opens the file for reading only (it must exist)".
func TestDocReadOnlyMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing.db")
	c, err := api.Open(p, &api.Options{ReadOnly: true})
	if err == nil {
		c.Close()
		_, serr := os.Stat(p)
		t.Fatalf("ReadOnly Open of a missing file succeeded (file created: %v)", serr == nil)
	}
	if _, serr := os.Stat(p); serr == nil {
		t.Errorf("ReadOnly Open created %s", p)
	}
}

// bolt.Options.Mode: "the permission of a newly created file".
func TestDocStoreMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.db")
	db, err := bolt.Open(p, &bolt.Options{Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("Mode 0640 gave %04o", fi.Mode().Perm())
	}
}

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

func openClose(t *testing.T, path string, o *api.Options) string {
	t.Helper()
	var warn bytes.Buffer
	if o == nil {
		o = &api.Options{}
	}
	o.Warn = &warn
	c, err := api.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return warn.String()
}

// Headers' list damaged, an application opens with parameter names only:
// nothing is rebuilt, and the warning does not say it is.
func TestDamagedListWarningOnlyWhenRebuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Merchant-Pin"}})
	bolttest.PutMeta(t, path, "sensitive_headers", `["x-merchant-pin"`)
	w := openClose(t, path, &api.Options{SensitiveParams: []string{"merchant_pin"}})
	if strings.Contains(w, "rebuilt") || !strings.Contains(w, "sensitive_headers") || !strings.Contains(w, "shown redacted") {
		t.Errorf("warning:\n%s\nwant it to name sensitive_headers, say values are hidden, and claim no rebuild", w)
	}
	// Header names given: the list is rebuilt, and the warning says so.
	if w := openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Other"}}); !strings.Contains(w, "rebuilt") {
		t.Errorf("an open that rebuilt the damaged list did not warn:\n%s", w)
	}
}

// A recorded list whose value is JSON null would decode as no names: it is
// damage (only arrays are written), reported by check, and every value is
// hidden (found in a review).
func TestNullListIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Merchant-Pin"}})
	bolttest.PutMeta(t, path, "sensitive_headers", `null`)
	c, err := api.Open(path, &api.Options{Warn: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !c.Redactor().IsSensitiveHeader("X-Merchant-Pin") {
		t.Errorf("a sensitive_headers value of null: check OK %v, X-Merchant-Pin hidden %v; want reported and hidden", rep.OK(), c.Redactor().IsSensitiveHeader("X-Merchant-Pin"))
	}
}

// The parameter list is damaged; an application opens with header names
// only. The damaged parameter list stays damaged (every value hidden), not
// rewritten as an empty list.
func TestDamagedListOfOtherKindStaysHidden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	openClose(t, path, &api.Options{SensitiveParams: []string{"merchant_pin"}})
	bolttest.PutMeta(t, path, "sensitive_params", `["merchant_pin"`)
	openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-New"}})
	c, err := api.Open(path, &api.Options{Warn: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Redactor().IsSensitiveParam("merchant_pin") {
		t.Errorf("a recorded parameter is shown in clear after an open with header names only: the damaged list was rewritten")
	}
}

// Blank names given with a damaged list rebuild nothing, and the warning
// does not claim they do (found in a review).
func TestDamagedListBlankNamesClaimNoRebuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Merchant-Pin"}})
	bolttest.PutMeta(t, path, "sensitive_headers", `["x-merchant-pin"`)
	w := openClose(t, path, &api.Options{SensitiveHeaders: []string{" "}})
	if strings.Contains(w, "rebuilt") {
		t.Errorf("blank names given, nothing rebuilt, but the warning says so:\n%s", w)
	}
}

// An empty value, or a list with a blank or null name, is damage too, like
// null: only non-blank names are ever written (found in a review).
func TestEmptyOrBlankListValueIsDamage(t *testing.T) {
	for _, v := range []string{"", " ", "[null]", `[""]`} {
		path := filepath.Join(t.TempDir(), "x.db")
		openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Merchant-Pin"}})
		bolttest.PutMeta(t, path, "sensitive_headers", v)
		c, err := api.Open(path, &api.Options{Warn: &bytes.Buffer{}})
		if err != nil {
			t.Fatal(err)
		}
		if !c.Redactor().IsSensitiveHeader("X-Merchant-Pin") {
			t.Errorf("sensitive_headers = %q: X-Merchant-Pin shown in clear", v)
		}
		c.Close()
	}
}

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
			bolttest.PutMeta(t, path, "sensitive_headers", damaged)
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
