package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		text string
		want string // "" for accepted
	}{
		{`{"url":"http://x/","key":"k"}`, ""},
		{`{"a":{"b":1,"c":[{"b":2},{"b":3}]},"b":4}`, ""}, // the same name in different objects
		{`{"k":"\ud83d\ude00"}`, ""},                      // a surrogate pair is one rune
		{`{"k":"\\ud800"}`, ""},                           // an escaped backslash, then text
		{`{"k":"é"}`, ""},
		{`[1,2,{"x":null}]`, ""},
		{"{\"k\":\"a\xffb\"}", "not UTF-8"},
		{`{"k":"\ud800"}`, "surrogate"},
		{`{"k":"\ud800x"}`, "surrogate"},
		{`{"k":"\udc00"}`, "surrogate"},
		{`{"k":"\ud800\u0041"}`, "surrogate"},
		{`{"url":"a","url":"b"}`, `"url" is given twice`},
		{`{"url":"a","URL":"b"}`, `"url" and "URL"`},
		{`{"h":{"X-A":"1","X-A":"2"}}`, "given twice"},
		{`{"a":[{"k":1,"k":2}]}`, "given twice"},
		{`{"a":1,`, ""}, // not JSON: left to the decoder
	} {
		err := Check([]byte(c.text))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%s) = %v, want accepted", c.text, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%s) = %v, want an error containing %q", c.text, err, c.want)
		}
	}
}

// What Check accepts, encoding/json decodes to the same text it encodes:
// nothing was replaced or dropped on the way.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1,"A":2}`, `["\u00e9"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Check(b) != nil {
			return
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if s, ok := v.(string); ok && strings.ContainsRune(s, '\uFFFD') && !strings.Contains(string(b), "\uFFFD") && !strings.Contains(strings.ToLower(string(b)), `\ufffd`) {
			t.Fatalf("Check accepted %q, decoded with a replacement character", b)
		}
	})
}
