package statusquery

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// MaxTemplateLen is the longest status URL template ValidateTemplate
// accepts, in bytes.
const MaxTemplateLen = 2048

// ErrInvalidTemplate is matched (errors.Is) by every error about an unusable
// status URL template.
var ErrInvalidTemplate = errors.New("statusquery: invalid status URL template")

// ErrInvalidValue is matched (errors.Is) by every error about a key or job id
// that cannot be placed into a status URL.
var ErrInvalidValue = errors.New("statusquery: value cannot be placed in the status URL template")

// acceptedTemplate tells the user what a good template looks like.
const acceptedTemplate = "accepted: an absolute http or https URL of at most 2048 ASCII bytes " +
	"with {key} and/or {id} in its path or query, no user:password@ and no #fragment, " +
	"e.g. https://api.example.com/v1/payments?idempotency_key={key}"

// TemplateError reports why a status URL template was rejected.
type TemplateError struct {
	// Template is the rejected template. It is kept out of the message
	// because a query string may carry a secret.
	Template string
	// Reason says what is wrong, e.g. "has no {key} or {id}".
	Reason string
}

// Error names the template (not its text), the problem and what is
// accepted.
func (e *TemplateError) Error() string {
	return "statusquery: status URL template " + e.Reason + "; " + acceptedTemplate
}

// Unwrap returns ErrInvalidTemplate.
func (e *TemplateError) Unwrap() error { return ErrInvalidTemplate }

// ValueError reports a key or job id that cannot be placed into a status URL.
type ValueError struct {
	// Placeholder is "{key}" or "{id}".
	Placeholder string
	// Reason says what is wrong with the value.
	Reason string
}

// Error names the placeholder and the problem.
func (e *ValueError) Error() string {
	return "statusquery: cannot expand " + e.Placeholder + " in the status URL template: " + e.Reason
}

// Unwrap returns ErrInvalidValue.
func (e *ValueError) Unwrap() error { return ErrInvalidValue }

// segment is a piece of a parsed template: literal text, or a placeholder
// ("key" or "id") with the part of the URL it sits in.
type segment struct {
	lit     string
	name    string
	inQuery bool
}

// ValidateTemplate checks a status URL template: at most MaxTemplateLen
// bytes of printable ASCII; an absolute http or https URL with a host once
// placeholders are filled; at least one {key} or {id}, only in the path or
// query; no other {...}, no stray braces, every "%" starting a valid escape,
// no user:password@ and no #fragment.
func ValidateTemplate(t string) error {
	_, err := parseTemplate(t)
	return err
}

// Template is a validated status URL template, parsed once and expanded
// many times.
type Template struct {
	raw  string
	segs []segment
}

// ParseTemplate validates t (see ValidateTemplate) and returns it parsed.
func ParseTemplate(t string) (*Template, error) {
	segs, err := parseTemplate(t)
	if err != nil {
		return nil, err
	}
	return &Template{raw: t, segs: segs}, nil
}

// String returns the template as it was given.
func (t *Template) String() string { return t.raw }

// Expand fills a status URL template with an idempotency key and a job id.
// It validates the template first (see ValidateTemplate).
//
// A value in the path is escaped with url.PathEscape, so "/" and "?" stay
// inside one path segment, and "+" stays a plus (QueryEscape would turn a
// space into "+", which a path does not decode). A value in the query is
// escaped with url.QueryEscape, because PathEscape leaves "&", "=" and "+"
// alone and those would split the parameter or decode as a space.
//
// A placeholder used by the template needs a non-empty value: an empty key
// could turn "/ops?key={key}" into a listing of every operation. In the path,
// the values "." and ".." are refused too, because path normalization at the
// target or a proxy would remove or climb the segment.
func Expand(template, key, id string) (string, error) {
	t, err := ParseTemplate(template)
	if err != nil {
		return "", err
	}
	return t.Expand(key, id)
}

// Expand fills the template with an idempotency key and a job id, with the
// escaping and refusals of the package function Expand.
func (t *Template) Expand(key, id string) (string, error) {
	var b strings.Builder
	b.Grow(len(t.raw) + 3*(len(key)+len(id)))
	for _, s := range t.segs {
		if s.name == "" {
			b.WriteString(s.lit)
			continue
		}
		v := key
		what := "the key"
		if s.name == "id" {
			v, what = id, "the job id"
		}
		placeholder := "{" + s.name + "}"
		if v == "" {
			return "", &ValueError{Placeholder: placeholder, Reason: what + " is empty"}
		}
		if s.inQuery {
			b.WriteString(url.QueryEscape(v))
			continue
		}
		if v == "." || v == ".." {
			return "", &ValueError{Placeholder: placeholder,
				Reason: what + " is " + strconv.Quote(v) + ", which path normalization would remove; put the placeholder in the query"}
		}
		b.WriteString(url.PathEscape(v))
	}
	return b.String(), nil
}

// parseTemplate validates t and splits it into segments.
func parseTemplate(t string) ([]segment, error) {
	fail := func(reason string) ([]segment, error) {
		return nil, &TemplateError{Template: t, Reason: reason}
	}
	switch {
	case t == "":
		return fail("is empty")
	case len(t) > MaxTemplateLen:
		return fail("is " + strconv.Itoa(len(t)) + " bytes, over 2048")
	}
	var (
		segs    []segment
		starts  []int // byte offset of each placeholder
		probe   strings.Builder
		lit     strings.Builder
		inQuery bool
	)
	probe.Grow(len(t))
	lit.Grow(len(t))
	flush := func() {
		if lit.Len() > 0 {
			segs = append(segs, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c <= ' ' || c >= 0x7f:
			return fail("has a space, control or non-ASCII byte at offset " + strconv.Itoa(i) + " (percent-encode it)")
		case c == '#':
			return fail("has a #fragment, which is never sent to the server")
		case c == '%':
			if i+2 >= len(t) || !isHex(t[i+1]) || !isHex(t[i+2]) {
				return fail("has a \"%\" at offset " + strconv.Itoa(i) + " that does not start an escape like %2F")
			}
		case c == '}':
			return fail("has a stray \"}\" at offset " + strconv.Itoa(i))
		case c == '{':
			name := ""
			switch {
			case strings.HasPrefix(t[i:], "{key}"):
				name = "key"
			case strings.HasPrefix(t[i:], "{id}"):
				name = "id"
			default:
				return fail("has " + strconv.Quote(braced(t[i:])) + "; the only placeholders are {key} and {id}")
			}
			flush()
			segs = append(segs, segment{name: name, inQuery: inQuery})
			starts = append(starts, i)
			probe.WriteString("x")
			i += len(name) + 1
			continue
		case c == '?':
			inQuery = true
		}
		lit.WriteByte(c)
		probe.WriteByte(c)
	}
	flush()
	if len(starts) == 0 {
		return fail("has no {key} or {id}")
	}

	// The authority runs from "://" to the first "/" or "?"; no placeholder
	// may sit in it or before it.
	if i := strings.Index(t, "://"); i >= 0 {
		authEnd := len(t)
		if j := strings.IndexAny(t[i+3:], "/?"); j >= 0 {
			authEnd = i + 3 + j
		}
		if starts[0] < authEnd {
			return fail("has a placeholder in the scheme, host or port; {key} and {id} may appear only in the path or query")
		}
	}
	u, err := url.Parse(probe.String())
	if err != nil {
		// The inner error only: the whole URL may carry a secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fail("is not a URL (" + err.Error() + ")")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" {
			return fail("is not an absolute URL")
		}
		return fail("has scheme " + strconv.Quote(u.Scheme) + ", not http or https")
	case u.Opaque != "" || u.Host == "":
		return fail("has no host (write scheme://host/...)")
	case u.User != nil:
		return fail("has user:password@; put credentials in the job's headers instead")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fail("has port " + strconv.Quote(p) + ", not 1-65535")
		}
	}
	return segs, nil
}

// braced returns the placeholder-like text at the start of s, cut short.
func braced(s string) string {
	if j := strings.IndexByte(s, '}'); j >= 0 && j < 24 {
		return s[:j+1]
	}
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
