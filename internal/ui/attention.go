package ui

import (
	"net/http"
	"net/url"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// attentionPageSize is how many needs_attention jobs one page lists.
const attentionPageSize = 50

// attentionData is the needs_attention page.
type attentionData struct {
	Items []attentionItem
	Total int64
	Next  string
}

// attentionItem is one job of the queue with what to check.
type attentionItem struct {
	Job   *api.Job
	Check string
}

func (s *server) attention(w http.ResponseWriter, r *http.Request) {
	notice := ""
	if q := r.URL.Query(); q.Get("done") == "resolve" && q.Get("job") != "" {
		notice = "Resolved " + q.Get("job") + "."
	}
	s.attentionPage(w, r, http.StatusOK, notice, "")
}

// attentionPage lists the jobs waiting for a person, those waiting
// longest first.
func (s *server) attentionPage(w http.ResponseWriter, r *http.Request, status int, notice, errText string) {
	ctx := r.Context()
	st, err := s.c.Stats(ctx)
	if err != nil {
		s.fail(w, r, statusOf(err), "reading the counts failed: "+err.Error())
		return
	}
	cursor := r.URL.Query().Get("cursor")
	if r.Method != http.MethodGet {
		cursor = ""
	}
	p, err := s.c.List(ctx, api.ListFilter{States: []store.State{store.StateNeedsAttention}, Limit: attentionPageSize, Oldest: true, Cursor: cursor})
	if err != nil {
		s.fail(w, r, statusOf(err), err.Error())
		return
	}
	d := attentionData{Total: st[string(store.StateNeedsAttention)]}
	for _, j := range p.Jobs {
		d.Items = append(d.Items, attentionItem{Job: j, Check: checkHint(j)})
	}
	if p.Next != "" {
		d.Next = "/ui/attention?cursor=" + url.QueryEscape(p.Next)
	}
	s.render(w, r, status, "attention", page{Title: "Needs attention", Nav: "attention", Notice: notice, Error: errText, Data: d})
}
