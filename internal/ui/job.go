package ui

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"unicode"
	"unicode/utf8"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// maxBodyShown bounds the request body shown as text; maxHexShown the
// bytes of a binary one shown as hex.
const (
	maxBodyShown = 64 << 10
	maxHexShown  = 1 << 10
)

// jobData is the job page.
type jobData struct {
	Job      *api.Job
	Body     bodyView
	Result   bodyView
	Timeline []step
	Check    string // what a person should check, for a needs_attention job
	// Which actions the job's state allows now.
	CanRetry, CanCancel, CanResolve bool
}

// bodyView is a body as the page shows it: text, or hex, or its size
// alone.
type bodyView struct {
	Size      int
	Text      string
	Hex       string
	Cut       bool   // only the first part is shown
	Withheld  string // why the body is not shown, when it is not
	Truncated bool   // the stored copy itself was cut (a target's answer over the limit)
}

// viewBody makes the bodyView of b: text when it is UTF-8 without
// control characters (other than tab and line breaks), else hex.
func viewBody(b []byte) bodyView {
	v := bodyView{Size: len(b)}
	if len(b) == 0 {
		return v
	}
	if textual(b) {
		if len(b) > maxBodyShown {
			b, v.Cut = b[:maxBodyShown], true
			for len(b) > 0 && !utf8.Valid(b) {
				b = b[:len(b)-1]
			}
		}
		v.Text = string(b)
		return v
	}
	if len(b) > maxHexShown {
		b, v.Cut = b[:maxHexShown], true
	}
	v.Hex = hex.Dump(b)
	return v
}

func textual(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

// checkHint is what a person should check before resolving j.
func checkHint(j *api.Job) string {
	if j.State != store.StateNeedsAttention {
		return ""
	}
	if j.StatusURL != "" {
		return fmt.Sprintf("idemrun could not learn the outcome from the status URL. Check at %s whether the request with Idempotency-Key %s took effect: resolve as succeeded if it did, failed if it did not.", store.HostOf(j.URL), j.Key)
	}
	return fmt.Sprintf("This job has no status URL, so idemrun cannot ask. Check at %s whether the request with Idempotency-Key %s took effect: resolve as succeeded if it did, failed if it did not.", store.HostOf(j.URL), j.Key)
}

func (s *server) jobPage(w http.ResponseWriter, r *http.Request, id string, status int, notice, errText string) {
	j, err := s.c.Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, statusOf(err), err.Error())
		return
	}
	d := jobData{Job: j, Timeline: timeline(j.History), Check: checkHint(j),
		CanRetry: j.State == store.StateFailed, CanCancel: j.State == store.StatePending && !j.MayHaveEffect,
		CanResolve: j.State == store.StateNeedsAttention}
	body, err := s.c.RequestBody(r.Context(), j.ID)
	switch {
	case err == nil:
		d.Body = viewBody(body)
	case errors.Is(err, api.ErrNotOffered):
		d.Body = bodyView{Size: j.BodySize, Withheld: "the body is not shown through a runner's admin socket (only its size)"}
	default:
		s.fail(w, r, statusOf(err), err.Error())
		return
	}
	if res := j.Result; res != nil {
		b := []byte(res.Body)
		if res.Body == "" {
			b = res.BodyBase64
		}
		d.Result = viewBody(b)
		d.Result.Truncated = res.Truncated
	}
	refresh := 0
	if j.State == store.StatePending || j.State == store.StateRunning || j.State == store.StateUnknown {
		refresh = int(s.o.Refresh.Seconds())
	}
	s.render(w, r, status, "job", page{Title: "Job " + j.ID, Nav: "jobs", Refresh: refresh, Notice: notice, Error: errText, Data: d})
}

func (s *server) job(w http.ResponseWriter, r *http.Request) {
	notice := ""
	switch r.URL.Query().Get("done") {
	case "retry":
		notice = "Retried: the job is pending again, with the same key and a fresh attempt budget."
	case "cancel":
		notice = "Canceled."
	case "resolve":
		notice = "Resolved."
	}
	s.jobPage(w, r, r.PathValue("id"), http.StatusOK, notice, "")
}

// act takes a job action: retry, cancel, or resolve (note and as).
func (s *server) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	note, who := r.PostForm.Get("note"), actor(r)
	var j *api.Job
	var err error
	switch action {
	case "retry":
		j, err = s.c.Retry(r.Context(), id, who, note)
	case "cancel":
		j, err = s.c.Cancel(r.Context(), id, who, note)
	case "resolve":
		j, err = s.c.Resolve(r.Context(), id, store.State(r.PostForm.Get("as")), who, note)
	default:
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("no action %q: the actions are retry, cancel and resolve", action))
		return
	}
	back := r.PostForm.Get("back")
	if err != nil {
		if back == "/ui/attention" {
			s.attentionPage(w, r, statusOf(err), "", fmt.Sprintf("%s %s: %v", action, id, err))
			return
		}
		s.jobPage(w, r, id, statusOf(err), "", fmt.Sprintf("%s: %v", action, err))
		return
	}
	s.o.Logger.Info("dashboard: job action", "action", action, "job", j.ID, "actor", who, "state", j.State)
	to := "/ui/jobs/" + url.PathEscape(j.ID) + "?done=" + action
	if back == "/ui/attention" {
		to = "/ui/attention?done=" + action + "&job=" + url.QueryEscape(j.ID)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
