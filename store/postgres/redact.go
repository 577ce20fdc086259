package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// mask stands for a password in messages.
const mask = "xxxxx"

// redactor keeps a database URL's password out of messages: it knows the
// secrets the URL holds (its user's password, a password parameter, the
// PGPASSWORD the driver may read) and removes them from any text.
type redactor struct {
	raw     string
	secrets []string
}

var (
	// keywordPassword is a password in a keyword string (password=x,
	// password = 'x y').
	keywordPassword = regexp.MustCompile(`(?i)\bpassword\s*=\s*('(?:\\.|[^'\\])*'|[^\s&#]*)`)
)

func newRedactor(raw string) redactor {
	r := redactor{raw: raw}
	add := func(s string) {
		if s == "" {
			return
		}
		r.secrets = append(r.secrets, s)
		if u, err := url.PathUnescape(s); err == nil {
			r.secrets = append(r.secrets, u)
		}
		if u, err := url.QueryUnescape(s); err == nil {
			r.secrets = append(r.secrets, u)
		}
		r.secrets = append(r.secrets, url.QueryEscape(s), url.PathEscape(s))
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		// What follows the user's first colon, up to the @ before the
		// host, is the password, as written and as decoded. In a URL
		// that does not parse, the host is not known: everything up to
		// the last @ is taken, which may hide more than the password.
		rest := raw[i+3:]
		at := strings.LastIndex(rest, "@")
		if u, err := url.Parse(raw); err == nil {
			if p, ok := u.User.Password(); ok {
				add(p)
			}
			at = -1
			if u.User != nil {
				at = strings.LastIndex(rest, "@"+u.Host)
			}
		}
		if at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				add(rest[c+1 : at])
			}
		}
	}
	for _, m := range keywordPassword.FindAllStringSubmatch(raw, -1) {
		v := m[1]
		add(v)
		if len(v) >= 2 && v[0] == '\'' {
			add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v[1 : len(v)-1]))
		}
	}
	add(os.Getenv("PGPASSWORD"))
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) }) // longest first
	r.secrets = slices.Compact(r.secrets)
	return r
}

// scrub removes every secret from s.
func (r redactor) scrub(s string) string {
	for _, sec := range r.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, mask)
		}
	}
	return s
}

// location returns the URL with its password masked.
func (r redactor) location() string {
	s := r.raw
	if u, err := url.Parse(s); err == nil && strings.Contains(s, "://") {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), mask)
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", mask)
			u.RawQuery = q.Encode()
		}
		s = u.String()
	} else {
		s = keywordPassword.ReplaceAllString(s, "password="+mask)
	}
	return r.scrub(s)
}

// wrap returns err with every secret removed from its message. errors.Is
// and errors.As still see the errors it wraps.
func (r redactor) wrap(err error) error {
	if err == nil || len(r.secrets) == 0 {
		return err
	}
	if _, ok := err.(*redactedError); ok {
		return err
	}
	return &redactedError{err: err, msg: r.scrub(err.Error())}
}

// parseError reports a URL that does not parse. The driver's error keeps
// the URL as given, password included, so only its scrubbed text is kept.
func (r redactor) parseError(err error) error {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		msg = pe.Error()
	}
	return errors.New(r.scrub(fmt.Sprintf("store: the database URL %s does not parse: %s", r.location(), msg)))
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Redacted returns the database URL (or keyword string) with its
// password masked, for messages and logs.
func Redacted(url string) string { return newRedactor(url).location() }

// Scrubber returns a function that removes the secrets of the database
// URL url (its password, as written and as decoded) from any text: for a
// caller that may echo the URL where it was not expected, such as a
// command line's stray argument.
func Scrubber(url string) func(string) string { return newRedactor(url).scrub }
