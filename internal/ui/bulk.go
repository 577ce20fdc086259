package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// bulkSample is how many of the matching jobs the count shows.
const bulkSample = 20

// actionFor is the bulk action that applies to jobs in each state.
var actionFor = map[store.State]api.BulkAction{
	store.StateFailed:         api.BulkRetry,
	store.StatePending:        api.BulkCancel,
	store.StateNeedsAttention: api.BulkResolve,
}

// stateOf is the state each bulk action applies to.
var stateOf = map[api.BulkAction]store.State{
	api.BulkRetry:   store.StateFailed,
	api.BulkCancel:  store.StatePending,
	api.BulkResolve: store.StateNeedsAttention,
}

// bulkForm is a bulk action as the form gave it.
type bulkForm struct {
	Filter filterForm
	Action string
	As     string
	Note   string
}

// State is the state the form's action applies to.
func (b bulkForm) State() store.State { return stateOf[api.BulkAction(b.Action)] }

// bulkData is the bulk page: the form; after a count, how many match and
// some of them; after the action, what it did.
type bulkData struct {
	Form    bulkForm
	Counted *api.BulkResult
	Sample  []*api.Job
	Done    *api.BulkResult
	Jobs    string // the jobs page of the filter
	// CountedAt is when the count was made (RFC 3339), which the
	// confirmation sends back: it changes only jobs last updated before.
	CountedAt string
}

// parseBulk reads a bulk action from form values (the query of the GET,
// the form of the POST).
func parseBulk(v url.Values) (api.BulkRequest, bulkForm, error) {
	var bf bulkForm
	bf.Action, bf.As, bf.Note = v.Get("action"), v.Get("as"), v.Get("note")
	q := url.Values{}
	for _, k := range []string{"host", "key_prefix", "id_prefix", "since", "until"} {
		if x := v.Get(k); x != "" {
			q.Set(k, x)
		}
	}
	f, form, err := parseFilter(q)
	bf.Filter = form
	if err != nil {
		return api.BulkRequest{}, bf, err
	}
	if bf.Action == "" {
		bf.Action = string(api.BulkRetry)
	}
	st, ok := stateOf[api.BulkAction(bf.Action)]
	if !ok {
		return api.BulkRequest{}, bf, &api.InvalidError{Field: "action", Value: strconv.Quote(bf.Action), Accepted: "retry (failed jobs), cancel (pending jobs) or resolve (needs_attention jobs)"}
	}
	f.States, f.Limit, f.Cursor = []store.State{st}, 0, ""
	req := api.BulkRequest{Filter: f, Action: api.BulkAction(bf.Action), Note: bf.Note}
	if req.Action == api.BulkResolve {
		req.As = store.State(bf.As)
	}
	return req, bf, nil
}

func (s *server) bulkForm(w http.ResponseWriter, r *http.Request) {
	_, bf, err := parseBulk(r.URL.Query())
	errText := ""
	status := http.StatusOK
	if err != nil {
		errText, status = err.Error(), http.StatusBadRequest
	}
	s.render(w, r, status, "bulk", page{Title: "Bulk actions", Nav: "bulk", Error: errText, Data: bulkData{Form: bf}})
}

// bulk counts the jobs a bulk action would change (step count), or
// takes it (step confirm): the jobs it changes are those the filter
// matches when it is confirmed.
func (s *server) bulk(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	req, bf, err := parseBulk(r.PostForm)
	d := bulkData{Form: bf}
	if err == nil {
		jq := bf.Filter.Query()
		jq.Set("state", string(bf.State()))
		d.Jobs = "/ui/jobs?" + jq.Encode()
	}
	p := page{Title: "Bulk actions", Nav: "bulk", Data: &d}
	if err != nil {
		p.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "bulk", p)
		return
	}
	req.Actor = actor(r)
	confirm := r.PostForm.Get("step") == "confirm"
	req.DryRun = !confirm
	if confirm {
		// The jobs counted, not those that came to match since: a job
		// the filter matches now was last updated before the count, or it
		// was not among the jobs counted.
		if v := r.PostForm.Get("counted_at"); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				p.Error = (&api.InvalidError{Field: "counted_at", Value: strconv.Quote(v), Accepted: "the time the count page gave (RFC 3339)"}).Error()
				s.render(w, r, http.StatusBadRequest, "bulk", p)
				return
			}
			if f := &req.Filter; f.Until.IsZero() || at.Before(f.Until) {
				f.Until = at
			}
		}
	} else {
		d.CountedAt = s.c.Now().UTC().Format(time.RFC3339Nano)
	}
	res, err := s.c.Bulk(r.Context(), req)
	if err != nil {
		p.Error = fmt.Sprintf("bulk %s: %v", req.Action, err)
		if confirm && res.Changed > 0 {
			d.Done = &res
		}
		s.render(w, r, statusOf(err), "bulk", p)
		return
	}
	if confirm {
		s.o.Logger.Info("dashboard: bulk action", "action", req.Action, "matched", res.Matched, "changed", res.Changed, "unchanged", res.UnchangedCount, "actor", req.Actor)
		d.Done = &res
		p.Notice = fmt.Sprintf("%s: %d of %d matching jobs changed.", req.Action, res.Changed, res.Matched)
		s.render(w, r, http.StatusOK, "bulk", p)
		return
	}
	d.Counted = &res
	if res.Matched > 0 {
		f := req.Filter
		f.Limit = bulkSample
		sample, err := s.c.List(r.Context(), f)
		if err != nil {
			p.Error = err.Error()
			s.render(w, r, statusOf(err), "bulk", p)
			return
		}
		d.Sample = sample.Jobs
	}
	s.render(w, r, http.StatusOK, "bulk", p)
}
