package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemrun/idemrun/internal/adminwire"
)

// Paths of the dashboard that the token check knows: everything under
// UIPath may be reached with a session cookie instead of the bearer
// token; UILoginPath takes the token from a form and UILogoutPath ends
// the session; what is under UIStaticPath (style and script, no data) is
// served to anyone, so the login page can use it.
const (
	UIPath       = "/ui/"
	UILoginPath  = "/ui/login"
	UILogoutPath = "/ui/logout"
	UIStaticPath = "/ui/static/"
)

// Cookie names: the session's id, and the login form's CSRF token (set
// when the form is shown, compared with the form's copy when it is sent).
const (
	sessionCookie = "idemrun_session"
	loginCookie   = "idemrun_login"
)

// maxFormBody bounds the form of a dashboard POST (a resolve's note is
// the largest field).
const maxFormBody = 64 << 10

// UIAuth is what the token check tells the dashboard about a request.
type UIAuth struct {
	// CSRF is the token every POST form must carry as its "csrf" field:
	// the session's, or on the login page the login form's. Empty when
	// the request came with the bearer token or on the unix socket, where
	// no cookie speaks for the client and a form needs none.
	CSRF string
	// Session is set when a login cookie authenticated the request (the
	// page then offers to log out).
	Session bool
}

type uiAuthKey struct{}

// UIAuthFrom returns the UIAuth of a request's context.
func UIAuthFrom(ctx context.Context) UIAuth {
	a, _ := ctx.Value(uiAuthKey{}).(UIAuth)
	return a
}

func withUIAuth(r *http.Request, a UIAuth) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), uiAuthKey{}, a))
}

// Protect wraps h with the bearer token check of o.Token (h itself when
// o.Token is empty). With o.UI set, the dashboard's paths (UIPath) also
// take a session cookie, which a login form at UILoginPath sets
// (HttpOnly, SameSite=Strict, expiring after o.SessionTTL); a POST made
// with the cookie must carry its CSRF token (UIAuthFrom). Failed logins
// take from the same per-address budget as failed bearer tokens. idemrun
// ui serves the dashboard alone behind it.
func Protect(h http.Handler, o Options) http.Handler {
	if o.Token == "" {
		return h
	}
	return requireToken(h, o)
}

// requireToken wraps next with the bearer token check: the token is
// compared in constant time (of digests, so not even its length shows),
// failures are logged with the client's address and never the token, and
// each address may fail AuthBurst times, then once per AuthRefill (429
// with Retry-After meanwhile, whatever it sends: a right token among
// throttled guesses would otherwise tell them apart).
func requireToken(next http.Handler, o Options) http.Handler {
	want := sha256.Sum256([]byte(o.Token))
	now := o.Now
	if now == nil {
		now = time.Now
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	lim := newLimiter(now, AuthBurst, AuthRefill, maxTracked)
	g := &guard{next: next, want: want, lim: lim, logger: logger, sess: newSessions(now, o.SessionTTL)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.UI != nil && strings.HasPrefix(r.URL.Path, UIPath) && g.ui(w, r) {
			return
		}
		g.bearer(w, r)
	})
}

// guard is the state of requireToken.
type guard struct {
	next   http.Handler
	want   [sha256.Size]byte
	lim    *limiter
	logger *slog.Logger
	sess   *sessions
}

// right reports whether token is the token, in constant time.
func (g *guard) right(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], g.want[:]) == 1
}

func (g *guard) bearer(w http.ResponseWriter, r *http.Request) {
	key := clientKey(r.RemoteAddr)
	if r.Header.Get("Authorization") == "" {
		// No token is no guess: a scraper or health check without one
		// must not use up the failures that would lock out the operator
		// on the same address.
		g.logger.Warn("admin api: refused a request", "client", key, "reason", "no bearer token", "method", r.Method, "path", r.URL.Path)
		refuse(w, http.StatusUnauthorized, 0)
		return
	}
	v := g.lim.take(key)
	if !v.ok {
		if v.first {
			g.logger.Warn("admin api: throttling a client after repeated token failures: its requests are answered 429 until it may try again",
				"client", key, "retry_after", v.wait.Round(time.Millisecond))
		}
		refuse(w, http.StatusTooManyRequests, v.wait)
		return
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") && g.right(got) {
		g.lim.refund(key)
		if v.throttle {
			g.logger.Info("admin api: a throttled client sent the right token", "client", key, "refused_meanwhile", v.refused)
		}
		g.next.ServeHTTP(w, r)
		return
	}
	why := "wrong bearer token"
	if !strings.EqualFold(scheme, "Bearer") {
		why = "not a bearer token"
	}
	attrs := []any{"client", key, "reason", why, "method", r.Method, "path", r.URL.Path, "attempts_left", v.left}
	if v.throttle {
		attrs = append(attrs, "refused_meanwhile", v.refused)
	}
	g.logger.Warn("admin api: refused a request", attrs...)
	refuse(w, http.StatusUnauthorized, 0)
}

// ui serves a dashboard request that a session or the login covers, and
// reports false for one that must show the bearer token.
func (g *guard) ui(w http.ResponseWriter, r *http.Request) bool {
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if c, err := r.Cookie(sessionCookie); err == nil {
		if s, ok := g.sess.get(c.Value); ok {
			g.session(w, r, c.Value, s, safe)
			return true
		}
		// Expired, logged out, or from before a restart: drop it.
		clearCookie(w, r, sessionCookie)
	}
	switch {
	case r.URL.Path == UILoginPath && r.Method == http.MethodPost:
		g.login(w, r)
	case r.URL.Path == UILoginPath && safe:
		csrf := randomToken()
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: csrf, Path: UIPath, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 3600})
		g.next.ServeHTTP(w, withUIAuth(r, UIAuth{CSRF: csrf}))
	case strings.HasPrefix(r.URL.Path, UIStaticPath) && safe:
		g.next.ServeHTTP(w, r)
	case safe && r.Header.Get("Authorization") == "":
		// A browser without a session: to the login form, and back here
		// after it.
		http.Redirect(w, r, UILoginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	default:
		return false
	}
	return true
}

// session serves a request a live session authenticated.
func (g *guard) session(w http.ResponseWriter, r *http.Request, id string, s session, safe bool) {
	if safe {
		if r.URL.Path == UILoginPath {
			http.Redirect(w, r, UIPath, http.StatusSeeOther)
			return
		}
		g.next.ServeHTTP(w, withUIAuth(r, UIAuth{CSRF: s.csrf, Session: true}))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
		g.logger.Warn("dashboard: refused a form without its CSRF token", "client", clientKey(r.RemoteAddr), "method", r.Method, "path", r.URL.Path)
		http.Error(w, "403 forbidden: this form has no valid CSRF token (field csrf); reload the page and send it again", http.StatusForbidden)
		return
	}
	if r.URL.Path == UILogoutPath {
		g.sess.end(id)
		clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, UILoginPath, http.StatusSeeOther)
		return
	}
	g.next.ServeHTTP(w, withUIAuth(r, UIAuth{CSRF: s.csrf, Session: true}))
}

// login checks the login form's token and starts a session. Every
// outcome is a redirect: to the page asked for, or back to the form
// saying what went wrong.
func (g *guard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	c, err := r.Cookie(loginCookie)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "400 bad request: the login form could not be read ("+err.Error()+")", http.StatusBadRequest)
		return
	}
	next := loginNext(r.PostForm.Get("next"))
	back := func(why string) {
		http.Redirect(w, r, UILoginPath+"?"+why+"&next="+url.QueryEscape(next), http.StatusSeeOther)
	}
	if err != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(c.Value)) != 1 {
		back("expired=1")
		return
	}
	key := clientKey(r.RemoteAddr)
	v := g.lim.take(key)
	if !v.ok {
		if v.first {
			g.logger.Warn("dashboard: throttling a client after repeated token failures", "client", key, "retry_after", v.wait.Round(time.Millisecond))
		}
		back("wait=" + strconv.Itoa(max(1, int(math.Ceil(v.wait.Seconds())))))
		return
	}
	if !g.right(r.PostForm.Get("token")) {
		g.logger.Warn("dashboard: refused a login", "client", key, "reason", "wrong token", "attempts_left", v.left)
		back("failed=1")
		return
	}
	g.lim.refund(key)
	id, _ := g.sess.start()
	secure := r.TLS != nil
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: UIPath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure, MaxAge: int(g.sess.ttl.Seconds())})
	clearCookie(w, r, loginCookie)
	g.logger.Info("dashboard: logged in", "client", key)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// clearCookie tells the browser to drop a dashboard cookie.
func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: UIPath, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
}

// loginNext is where a login goes on to: the dashboard page it came
// from, never another site.
func loginNext(next string) string {
	if !strings.HasPrefix(next, UIPath) || strings.HasPrefix(next, UILoginPath) || strings.ContainsAny(next, "\\\r\n") || strings.Contains(next, "//") {
		return UIPath
	}
	return next
}

// refuse answers a request without the right token and closes its
// connection, without reading the rest of a declared body first (which a
// client could trickle for as long as it likes): a client without the
// token keeps no connection.
func refuse(w http.ResponseWriter, status int, wait time.Duration) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="idemrun"`)
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	msg := "missing or wrong bearer token"
	if status == http.StatusTooManyRequests {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		msg = "too many token failures from this address: try again in " + strconv.Itoa(secs) + " s"
	}
	writeErr(w, status, adminwire.CodeUnauthorized, msg)
}
