package statusquery_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/statusquery"
)

func TestValidateTemplate(t *testing.T) {
	t.Parallel()
	long := "https://api.example.com/ops/{key}?pad=" + strings.Repeat("a", statusquery.MaxTemplateLen)
	atLimit := "https://h/{key}?p="
	atLimit += strings.Repeat("a", statusquery.MaxTemplateLen-len(atLimit))
	for _, tc := range []struct {
		template string
		reason   string // "" means valid; otherwise a part of the error
	}{
		{"https://api.example.com/v1/payments?idempotency_key={key}", ""},
		{"http://127.0.0.1:8080/jobs/{id}", ""},
		{"HTTPS://Example.COM/x/{key}", ""},
		{"https://h/{key}/{id}?a=%2F&b={key}", ""},
		{"https://h?k={key}", ""},
		{"https://h/ops/{key}.json", ""},
		{"https://[::1]:8443/{key}", ""},
		{"https://h:443/{key}", ""},
		{atLimit, ""},

		{"", "is empty"},
		{long, "over 2048"},
		{"https://h/ops", "has no {key} or {id}"},
		{"https://h/{KEY}", `has "{KEY}"; the only placeholders are {key} and {id}`},
		{"https://h/{ key }", `has "{ key }"`},
		{"https://h/{other}/{key}", `has "{other}"`},
		{"https://h/{key", `has "{key"`},
		{"https://h/{{key}}", `has "{{key}"`},
		{"https://h/key}", `stray "}"`},
		{"ftp://h/{key}", `has scheme "ftp", not http or https`},
		{"mailto:ops+{key}@example.com", `has scheme "mailto"`},
		{"/ops/{key}", "is not an absolute URL"},
		{"h/ops/{key}", "is not an absolute URL"},
		{"https:///{key}", "has no host"},
		{"https:{key}", "has no host"},
		{"https:/h/{key}", "has no host"},
		{"https://user:pw@h/{key}", "has user:password@"},
		{"https://user@h/{key}", "has user:password@"},
		{"https://{key}.example.com/", "placeholder in the scheme, host or port"},
		{"https://h:{id}/x", "placeholder in the scheme, host or port"},
		{"https://h{key}?x=1", "placeholder in the scheme, host or port"},
		{"http{key}://h/", "placeholder in the scheme, host or port"},
		{"https://h/{key}#frag", "has a #fragment"},
		{"https://h/ops#{key}", "has a #fragment"},
		{"https://h/a b/{key}", "space, control or non-ASCII byte at offset 11"},
		{"https://h/\x00/{key}", "space, control or non-ASCII byte"},
		{"https://h/{key}\n", "space, control or non-ASCII byte"},
		{"https://h/grö/{key}", "non-ASCII"},
		{"https://h/%zz/{key}", `"%" at offset 10 that does not start an escape`},
		{"https://h/%{key}", `"%" at offset 10`},
		{"https://h/%4{key}", `"%" at offset 10`},
		{"https://h/{key}%", `"%" at offset 15`},
		{"https://h:99999/{key}", `has port "99999", not 1-65535`},
		{"https://h:0/{key}", `has port "0"`},
		{"https://h:x/{key}", "is not a URL"},
	} {
		err := statusquery.ValidateTemplate(tc.template)
		if tc.reason == "" {
			if err != nil {
				t.Errorf("ValidateTemplate(%.60q) = %v; want nil", tc.template, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ValidateTemplate(%.60q) = nil; want an error with %q", tc.template, tc.reason)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.reason) || !strings.HasPrefix(msg, "statusquery: status URL template ") ||
			!strings.Contains(msg, "accepted: an absolute http or https URL") {
			t.Errorf("ValidateTemplate(%.60q) = %q; want the field, %q and what is accepted", tc.template, msg, tc.reason)
		}
		var te *statusquery.TemplateError
		if !errors.Is(err, statusquery.ErrInvalidTemplate) || !errors.As(err, &te) || te.Template != tc.template {
			t.Errorf("ValidateTemplate(%.60q) = %#v; want a *TemplateError matching ErrInvalidTemplate", tc.template, err)
		}
		if _, xerr := statusquery.Expand(tc.template, "k", "j"); !errors.Is(xerr, statusquery.ErrInvalidTemplate) {
			t.Errorf("Expand(%.60q) error = %v; want ErrInvalidTemplate", tc.template, xerr)
		}
	}
}

func TestTemplateErrorHidesTemplate(t *testing.T) {
	t.Parallel()
	err := statusquery.ValidateTemplate("https://h/ops?api_key=s3cret")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error = %v; want an error that does not repeat the template", err)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		template, key, id string
		want              string
	}{
		{"https://h/ops/{key}", "k-1", "j", "https://h/ops/k-1"},
		{"https://h/ops/{key}", "a/b?c", "j", "https://h/ops/a%2Fb%3Fc"},
		{"https://h/ops/{key}", "a b+c&d=e", "j", "https://h/ops/a%20b+c&d=e"},
		{"https://h/ops/{key}", "100%", "j", "https://h/ops/100%25"},
		{"https://h/ops/{key}", "ключ-ü", "j", "https://h/ops/%D0%BA%D0%BB%D1%8E%D1%87-%C3%BC"},
		{"https://h/ops/{key}", "...", "j", "https://h/ops/..."},
		{"https://h/ops/{key}", "#frag", "j", "https://h/ops/%23frag"},
		{"https://h/ops?key={key}&id={id}", "a b+c&d=e", "j 1", "https://h/ops?key=a+b%2Bc%26d%3De&id=j+1"},
		{"https://h/ops?key={key}", "a/b?c%", "j", "https://h/ops?key=a%2Fb%3Fc%25"},
		{"https://h/ops?key={key}", "..", "j", "https://h/ops?key=.."},
		{"https://h/{id}/{key}?again={key}", "k/1", "j1", "https://h/j1/k%2F1?again=k%2F1"},
		{"https://h/ops/{key}", "{id}", "j", "https://h/ops/%7Bid%7D"},
		{"https://h/ops/{key}", "k", "", "https://h/ops/k"}, // {id} unused: empty id is fine
		{"https://h/ops/{id}", "", "j", "https://h/ops/j"},
	} {
		got, err := statusquery.Expand(tc.template, tc.key, tc.id)
		if err != nil || got != tc.want {
			t.Errorf("Expand(%q, %q, %q) = %q, %v; want %q, nil", tc.template, tc.key, tc.id, got, err, tc.want)
		}
	}
}

func TestExpandRefusesValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		template, key, id string
		reason            string
	}{
		{"https://h/ops/{key}", "", "j", "cannot expand {key} in the status URL template: the key is empty"},
		{"https://h/ops?k={key}", "", "j", "the key is empty"},
		{"https://h/ops/{id}", "k", "", "cannot expand {id} in the status URL template: the job id is empty"},
		{"https://h/ops/{key}", ".", "j", `the key is ".", which path normalization would remove`},
		{"https://h/ops/{key}/x", "..", "j", `the key is ".."`},
		{"https://h/ops/{id}", "k", "..", `the job id is ".."`},
	} {
		got, err := statusquery.Expand(tc.template, tc.key, tc.id)
		var ve *statusquery.ValueError
		if err == nil || !strings.Contains(err.Error(), tc.reason) || !errors.Is(err, statusquery.ErrInvalidValue) || !errors.As(err, &ve) {
			t.Errorf("Expand(%q, %q, %q) = %q, %v; want a ValueError with %q", tc.template, tc.key, tc.id, got, err, tc.reason)
		}
	}
}

// TestExpandRoundTrip checks that every key comes back intact, in one path
// segment and in one query parameter, after the URL is parsed.
func TestExpandRoundTrip(t *testing.T) {
	t.Parallel()
	for _, key := range awkwardKeys() {
		got, err := statusquery.Expand("https://h/ops/{key}/status?k={key}&id={id}", key, "job/1")
		if err != nil {
			t.Errorf("Expand(key %q) error = %v; want nil", key, err)
			continue
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Errorf("url.Parse(%q) error = %v; want nil", got, err)
			continue
		}
		q := u.Query()
		if u.Path != "/ops/"+key+"/status" || q.Get("k") != key || q.Get("id") != "job/1" || len(q) != 2 {
			t.Errorf("Expand(key %q) = %q parsed as path %q, query %v; want the key back in both", key, got, u.Path, q)
		}
		if wantPath := "/ops/" + url.PathEscape(key) + "/status"; u.EscapedPath() != wantPath {
			t.Errorf("Expand(key %q) escaped path = %q; want %q", key, u.EscapedPath(), wantPath)
		}
	}
}

// awkwardKeys are keys that break naive URL building.
func awkwardKeys() []string {
	return []string{
		"plain-key_1",
		"a/b",
		"../../admin",
		"what?now",
		"100%",
		"%2F",
		"with space",
		"tab\tnew\nline",
		"a+b&c=d;e",
		"#hash",
		"{key}{id}",
		"ключ-ü-🔑",
		"\xff\xfe",
		"...",
	}
}

// A parsed Template expands exactly like the package function, and refuses
// the same values.
func TestParsedTemplateMatchesExpand(t *testing.T) {
	for _, tc := range []struct{ tpl, key, id string }{
		{"https://api.example.com/payments/{key}", "k 1/2", "i"},
		{"https://api.example.com/ops?key={key}&id={id}", "a&b=c+d", "01940000-0000-7000-8000-000000000000"},
		{"https://api.example.com/ops/{key}", "..", "i"},
		{"https://api.example.com/ops?key={key}", "", "i"},
	} {
		p, err := statusquery.ParseTemplate(tc.tpl)
		if err != nil {
			t.Fatalf("statusquery.ParseTemplate(%q): %v", tc.tpl, err)
		}
		got, gerr := p.Expand(tc.key, tc.id)
		want, werr := statusquery.Expand(tc.tpl, tc.key, tc.id)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Errorf("%q with %q: parsed gives %q, %v; Expand gives %q, %v", tc.tpl, tc.key, got, gerr, want, werr)
		}
	}
	if _, err := statusquery.ParseTemplate("https://api.example.com/no-placeholder"); err == nil {
		t.Error("ParseTemplate accepted a template without {key} or {id}")
	}
}
