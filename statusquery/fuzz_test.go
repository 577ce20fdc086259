package statusquery_test

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/statusquery"
)

// FuzzInterpret checks that any answer gives a valid outcome with a short
// detail, that the status code alone decides everything but 2xx, and that
// the body is never modified. Seeds: the protocol table and testdata/fuzz.
func FuzzInterpret(f *testing.F) {
	for _, tc := range protocolCases() {
		f.Add(tc.status, []byte(tc.body), tc.truncated)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, truncated bool) {
		orig := bytes.Clone(body)
		got, detail := statusquery.Interpret(status, body, truncated)
		if !got.Valid() {
			t.Fatalf("Interpret(%d, %q, %v) = %q; want a valid outcome", status, body, truncated, got)
		}
		if detail == "" || len(detail) > 100 {
			t.Errorf("Interpret(%d, %q, %v) detail = %q; want 1-100 bytes", status, body, truncated, detail)
		}
		if !bytes.Equal(body, orig) {
			t.Errorf("Interpret modified its body argument")
		}
		if again, detail2 := statusquery.Interpret(status, body, truncated); again != got || detail2 != detail {
			t.Errorf("Interpret gave %q, %q then %q, %q; want the same twice", got, detail, again, detail2)
		}
		switch {
		case status == 404 || status == 410:
			if got != statusquery.NotFound {
				t.Errorf("Interpret(%d, ...) = %q; want not_found", status, got)
			}
		case status < 200 || status > 299:
			if got != statusquery.NoAnswer {
				t.Errorf("Interpret(%d, ...) = %q; want no_answer", status, got)
			}
		case truncated:
			// A prefix proves an operation in progress or a second item,
			// never an end: found or not found needs the whole answer.
			if got != statusquery.InProgress && got != statusquery.Duplicate && got != statusquery.NoAnswer {
				t.Errorf("Interpret(%d, %q, truncated) = %q, %q; want in_progress, duplicate or no_answer", status, body, got, detail)
			}
		}
	})
}

// FuzzExpand checks that Expand accepts exactly what ValidateTemplate
// accepts (given usable values), that what it returns is an absolute
// http(s) URL whose host the values cannot change, and that a key and id
// come back intact from a path segment and a query parameter.
func FuzzExpand(f *testing.F) {
	f.Add("https://api.example.com/v1/payments?idempotency_key={key}", "k-1", "j-1")
	f.Add("http://127.0.0.1:8080/jobs/{id}/{key}", "a/b?c#d", "../x")
	f.Add("https://h/{key}", "%zz", "{id}")
	f.Add("https://h?x={key}&y={id}", "a b+c&d=e;f", "ü🔑")
	f.Add("https://{key}.h/", "evil.com/", "j")
	f.Add("https://h/%{key}", "41", "j")
	f.Add("https://u@h/{key}", "k", "j")
	f.Add("https://h/{key}#f", "k", "j")
	f.Add("https://h/{key}", ".", "..")
	for _, key := range awkwardKeys() {
		f.Add("https://h/ops/{key}?k={key}", key, key)
	}
	f.Fuzz(func(t *testing.T, template, key, id string) {
		verr := statusquery.ValidateTemplate(template)
		got, err := statusquery.Expand(template, key, id)
		if verr != nil {
			if !errors.Is(err, statusquery.ErrInvalidTemplate) {
				t.Fatalf("ValidateTemplate(%q) = %v but Expand error = %v; want ErrInvalidTemplate", template, verr, err)
			}
		} else if err != nil && !errors.Is(err, statusquery.ErrInvalidValue) {
			t.Fatalf("Expand(%q, %q, %q) error = %v; want nil or ErrInvalidValue for a valid template", template, key, id, err)
		}
		if err == nil {
			checkExpanded(t, template, key, id, got)
		}

		// Round trip through a fixed template.
		rt, err := statusquery.Expand("https://h/ops/{key}/x?k={key}&id={id}", key, id)
		unusable := key == "" || id == "" || key == "." || key == ".."
		if unusable != (err != nil) {
			t.Fatalf("Expand(fixed, %q, %q) error = %v; want an error only for empty or dot keys", key, id, err)
		}
		if err != nil {
			return
		}
		u, err := url.Parse(rt)
		if err != nil {
			t.Fatalf("url.Parse(%q) error = %v", rt, err)
		}
		q := u.Query()
		if u.Host != "h" || u.Path != "/ops/"+key+"/x" || q.Get("k") != key || q.Get("id") != id || len(q) != 2 {
			t.Fatalf("Expand(fixed, %q, %q) = %q: host %q path %q query %v; want the values back intact", key, id, rt, u.Host, u.Path, q)
		}
	})
}

// checkExpanded checks one successful expansion.
func checkExpanded(t *testing.T, template, key, id, got string) {
	t.Helper()
	if strings.ContainsAny(got, "{}# ") {
		t.Fatalf("Expand(%q, %q, %q) = %q; want no braces, # or spaces", template, key, id, got)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatalf("Expand(%q, %q, %q) = %q, which does not parse: %v", template, key, id, got, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" {
		t.Fatalf("Expand(%q, %q, %q) = %q; want an absolute http(s) URL with a host and no userinfo", template, key, id, got)
	}
	plain, err := statusquery.Expand(template, "k", "i")
	if err != nil {
		t.Fatalf("Expand(%q, \"k\", \"i\") error = %v; want nil when other values work", template, err)
	}
	if p, _ := url.Parse(plain); p == nil || p.Host != u.Host {
		t.Fatalf("Expand(%q, %q, %q) host = %q; want %q: values must not change the host", template, key, id, u.Host, plain)
	}
}
