package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
)

// funcs are the templates' helpers; html/template escapes what they
// return like any other value.
var funcs = template.FuncMap{
	"when": when,
	"ago":  ago,
	"dur":  dur,
	"apiDur": func(d api.Duration) string {
		return time.Duration(d).String()
	},
	"short": short,
	"jobURL": func(id string) string {
		return "/ui/jobs/" + url.PathEscape(id)
	},
	"resolveArgs": func(j *api.Job, a admin.UIAuth, back string) resolveArgs {
		return resolveArgs{Job: j, Auth: a, Back: back}
	},
}

// resolveArgs is what the resolve form needs: the job, the CSRF token,
// and the page to return to ("" for the job's own).
type resolveArgs struct {
	Job  *api.Job
	Auth admin.UIAuth
	Back string
}

// when is a time as the dashboard shows it: UTC, to the millisecond.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// ago is how long before now t was, briefly.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + dur(-d)
	}
	return dur(d) + " ago"
}

// dur is a duration rounded for reading.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 48*time.Hour:
		return d.Round(time.Second).String()
	default:
		return fmt.Sprintf("%dd%s", d/(24*time.Hour), (d % (24 * time.Hour)).Round(time.Minute))
	}
}

// short is s cut to n runes, with an ellipsis when cut.
func short(n int, s string) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
