package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// defaultPage is the jobs page's size when the query gives none.
const defaultPage = 50

// jobsData is the jobs page.
type jobsData struct {
	Form   filterForm
	States []store.State
	Jobs   []*api.Job
	Next   string // the URL of the next page, or ""
	Bulk   string // the bulk page for this filter, when one action applies to it
}

// filterForm is a filter as the query gave it, to fill the form in again.
type filterForm struct {
	States                    []string
	Host, KeyPrefix, IDPrefix string
	Since, Until              string
	Sort                      string
	Limit                     int
}

// Has reports whether the form picked state s.
func (f filterForm) Has(s store.State) bool { return slices.Contains(f.States, string(s)) }

// Query is the form as query parameters, without the states, cursor
// and limit.
func (f filterForm) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"host": f.Host, "key_prefix": f.KeyPrefix, "id_prefix": f.IDPrefix, "since": f.Since, "until": f.Until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// timeLayouts are the times a filter takes: RFC 3339, and what a
// datetime-local control sends (taken as UTC).
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

// formTime is how a datetime-local control shows a time.
const formTime = "2006-01-02T15:04:05"

func parseTime(field, v string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, &api.InvalidError{Field: field, Value: strconv.Quote(v), Accepted: "a time in RFC 3339 (2026-01-02T10:00:00Z) or YYYY-MM-DDTHH:MM (UTC)"}
}

// parseFilter reads a jobs filter from query parameters: state (repeated
// or comma-separated), host, key_prefix, id_prefix, since and until
// (last update in [since, until)), sort, limit and cursor. A bad one is
// an *api.InvalidError naming the parameter; the api checks what goes
// together.
func parseFilter(q url.Values) (api.ListFilter, filterForm, error) {
	var f api.ListFilter
	var form filterForm
	for _, v := range q["state"] {
		for _, p := range splitList(v) {
			st, err := store.ParseState(p)
			if err != nil {
				return f, form, &api.InvalidError{Field: "state", Value: strconv.Quote(p), Accepted: api.StatesAccepted}
			}
			if !slices.Contains(f.States, st) {
				f.States = append(f.States, st)
				form.States = append(form.States, string(st))
			}
		}
	}
	form.Host, form.KeyPrefix, form.IDPrefix = q.Get("host"), q.Get("key_prefix"), q.Get("id_prefix")
	f.Host, f.KeyPrefix, f.IDPrefix = form.Host, form.KeyPrefix, form.IDPrefix
	var err error
	if form.Since = q.Get("since"); form.Since != "" {
		if f.Since, err = parseTime("since", form.Since); err != nil {
			return f, form, err
		}
		form.Since = f.Since.Format(formTime)
	}
	if form.Until = q.Get("until"); form.Until != "" {
		if f.Until, err = parseTime("until", form.Until); err != nil {
			return f, form, err
		}
		form.Until = f.Until.Format(formTime)
	}
	switch form.Sort = q.Get("sort"); form.Sort {
	case "":
	case "oldest":
		f.Oldest = true
	case string(api.ListSortNextRun), string(api.ListSortUpdated):
		f.Sort = api.ListSort(form.Sort)
	default:
		return f, form, &api.InvalidError{Field: "sort", Value: strconv.Quote(form.Sort), Accepted: `"" (newest first), oldest, next_run or updated`}
	}
	form.Limit = defaultPage
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return f, form, &api.InvalidError{Field: "limit", Value: strconv.Quote(l), Accepted: "an integer from 1 to 1000"}
		}
		form.Limit = n
	}
	f.Limit = form.Limit
	f.Cursor = q.Get("cursor")
	return f, form, nil
}

// splitList splits a comma-separated parameter, dropping empty parts.
func splitList(v string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == ',' {
			if i > start {
				out = append(out, v[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func (s *server) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := jobsData{States: store.States()}
	f, form, err := parseFilter(q)
	d.Form = form
	if err != nil {
		s.render(w, r, http.StatusBadRequest, "jobs", page{Title: "Jobs", Nav: "jobs", Error: err.Error(), Data: d})
		return
	}
	p, err := s.c.List(r.Context(), f)
	if err != nil {
		s.render(w, r, statusOf(err), "jobs", page{Title: "Jobs", Nav: "jobs", Error: err.Error(), Data: d})
		return
	}
	d.Jobs = p.Jobs
	if p.Next != "" {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("cursor", p.Next)
		d.Next = "/ui/jobs?" + nq.Encode()
	}
	if len(f.States) == 1 {
		if a, ok := actionFor[f.States[0]]; ok {
			bq := form.Query()
			bq.Set("action", string(a))
			d.Bulk = "/ui/bulk?" + bq.Encode()
		}
	}
	s.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Nav: "jobs", Data: d})
}
