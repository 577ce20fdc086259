package api_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	bbolt "go.etcd.io/bbolt"
)

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

func putMeta(t *testing.T, path, key, val string) {
	t.Helper()
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte(key), []byte(val))
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// Headers' list damaged, an application opens with parameter names only:
// nothing is rebuilt, and the warning does not say it is.
func TestDamagedListWarningOnlyWhenRebuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	openClose(t, path, &api.Options{SensitiveHeaders: []string{"X-Merchant-Pin"}})
	putMeta(t, path, "sensitive_headers", `["x-merchant-pin"`)
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
	putMeta(t, path, "sensitive_headers", `null`)
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
	putMeta(t, path, "sensitive_params", `["merchant_pin"`)
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
	putMeta(t, path, "sensitive_headers", `["x-merchant-pin"`)
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
		putMeta(t, path, "sensitive_headers", v)
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
