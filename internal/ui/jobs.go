package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

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
}

// filterForm is a filter as the query gave it, to fill the form in again.
type filterForm struct {
	States []string
	Sort   string
	Limit  int
}

// Has reports whether the form picked state s.
func (f filterForm) Has(s store.State) bool { return slices.Contains(f.States, string(s)) }

// parseFilter reads a jobs filter from query parameters (state, repeated
// or comma-separated; sort; limit; cursor). A bad one is an
// *api.InvalidError naming the parameter.
func parseFilter(q url.Values) (api.ListFilter, filterForm, error) {
	var f api.ListFilter
	var form filterForm
	for _, v := range q["state"] {
		for _, p := range splitList(v) {
			st, err := store.ParseState(p)
			if err != nil {
				return f, form, &api.InvalidError{Field: "state", Value: strconv.Quote(p), Accepted: "pending, running, unknown, succeeded, failed, needs_attention, canceled"}
			}
			if !slices.Contains(f.States, st) {
				f.States = append(f.States, st)
				form.States = append(form.States, string(st))
			}
		}
	}
	switch form.Sort = q.Get("sort"); form.Sort {
	case "":
	case "next_run":
		if len(f.States) == 0 {
			return f, form, &api.InvalidError{Field: "sort", Value: "next_run", Accepted: "with at least one state picked (next_run lists each state's earliest jobs first)"}
		}
		f.Oldest = true
	default:
		return f, form, &api.InvalidError{Field: "sort", Value: strconv.Quote(form.Sort), Accepted: `"" (newest first) or next_run`}
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
	title := "Jobs"
	if len(form.States) > 0 {
		title = fmt.Sprintf("Jobs: %v", form.States)
	}
	s.render(w, r, http.StatusOK, "jobs", page{Title: title, Nav: "jobs", Data: d})
}
