// Package ui serves idemrun's web dashboard at /ui/: server-rendered
// pages over an api.Client (whose job views are already redacted), with
// its style and one small script embedded in the binary. The pages and
// their paths are a contract (scripts and bookmarks use them):
//
//	GET  /ui/                    overview: counts, finishes per minute, oldest due job, hosts
//	GET  /ui/jobs                jobs, filtered by query parameters, cursor pages
//	GET  /ui/jobs/{id}           one job: request, reason, timeline, actions
//	POST /ui/jobs/{id}/retry     and /cancel, /resolve (resolve needs note and as)
//	GET  /ui/attention           the needs_attention queue, resolved in place
//	GET  /ui/hosts               hosts, their policies, waiting jobs and health
//	GET  /ui/bulk, POST /ui/bulk an action over every job a filter matches, counted first
//	GET  /ui/login               the login form (admin.Protect checks it)
//
// Authentication and CSRF tokens are admin.Protect's: this package puts
// the token admin.UIAuthFrom gives into every form and serves every
// request it is handed. Every answer carries a Content-Security-Policy
// that allows only this package's own script and style.
package ui

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options configures Handler.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a line for each action taken; nil means
	// slog.Default().
	Logger *slog.Logger
	// Refresh is how often the live pages reload their figures; 0 means
	// 5 seconds.
	Refresh time.Duration
}

// CSP is the Content-Security-Policy of every answer: this package's own
// script and style and nothing else, no inline script, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// server holds the dashboard's state.
type server struct {
	c     *api.Client
	o     Options
	pages map[string]*template.Template
	chart *chartCache
}

// Handler serves the dashboard for c.
func Handler(c *api.Client, o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	s := &server{c: c, o: o, pages: parsePages(), chart: &chartCache{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/{$}", s.overview)
	mux.HandleFunc("GET /ui/jobs", s.jobs)
	mux.HandleFunc("GET /ui/jobs/{id}", s.job)
	mux.HandleFunc("POST /ui/jobs/{id}/{action}", s.act)
	mux.HandleFunc("GET /ui/attention", s.attention)
	mux.HandleFunc("GET /ui/hosts", s.hosts)
	mux.HandleFunc("GET /ui/bulk", s.bulkForm)
	mux.HandleFunc("POST /ui/bulk", s.bulk)
	mux.HandleFunc("GET "+admin.UILoginPath, s.login)
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET "+admin.UIStaticPath, http.StripPrefix(admin.UIStaticPath, http.FileServerFS(static)))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path+" (the pages are /ui/, /ui/jobs, /ui/jobs/ID, /ui/attention, /ui/hosts and /ui/bulk)")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// parsePages parses each page with the layout and the shared parts.
func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	names, _ := fs.Glob(templateFiles, "templates/*.html")
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || base == "parts" {
			continue
		}
		t := template.New("layout").Funcs(funcs)
		out[base] = template.Must(t.ParseFS(templateFiles, "templates/layout.html", "templates/parts.html", n))
	}
	return out
}

// page is what every template gets.
type page struct {
	Title   string
	Nav     string // the menu entry to mark as current
	Auth    admin.UIAuth
	Refresh int // seconds between live reloads; 0 for a page that does not reload
	Notice  string
	Error   string
	Data    any
}

// render writes a page, or only its live part when the script asks for
// it (partial=1).
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Auth = admin.UIAuthFrom(r.Context())
	t := s.pages[name]
	tmpl := "layout"
	if r.URL.Query().Get("partial") == "1" && p.Refresh > 0 {
		tmpl = "live"
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, tmpl, p); err != nil {
		s.o.Logger.Error("dashboard: rendering a page failed", "page", name, "err", err)
		http.Error(w, "500 internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail renders an error page.
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Error: msg})
}

// statusOf is the HTTP status of an api error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, api.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrIllegalTransition):
		return http.StatusConflict
	case errors.Is(err, api.ErrNotOffered):
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// actor names the person behind a request in a job's history: the
// dashboard and the client's address.
func actor(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return "dashboard"
	}
	return "dashboard@" + host
}
