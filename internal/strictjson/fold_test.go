package strictjson_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/idemrun/idemrun/internal/strictjson"
)

// encoding/json matches "ſtatus_url" (U+017F LATIN SMALL LETTER LONG S) to
// the field tagged status_url (its fold is Unicode simple folding), so a
// second spelling would silently overwrite the first: Check folds names the
// same way and refuses it. (Names differing in case are refused in maps too,
// headers among them, where they would name one HTTP header twice.)
func TestLongSDuplicateRefused(t *testing.T) {
	text := []byte(`{"status_url":"http://good/{key}","\u017ftatus_url":"http://evil/{key}"}`)
	var v struct {
		StatusURL string `json:"status_url"`
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("encoding/json decoded status_url=%q", v.StatusURL)
	if err := strictjson.Check(text); err == nil {
		t.Errorf("Check accepted two spellings of one struct field; encoding/json kept %q", v.StatusURL)
	}
	raw := []byte(`{"status_url":"http://good/{key}","ſtatus_url":"http://evil/{key}"}`) // raw UTF-8, no escape
	if err := strictjson.Check(raw); err == nil {
		t.Errorf("Check accepted raw ſ spelling too")
	}
}
