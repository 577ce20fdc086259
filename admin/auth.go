package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemrun/idemrun/internal/adminwire"
)

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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := clientKey(r.RemoteAddr)
		v := lim.take(key)
		if !v.ok {
			if v.first {
				logger.Warn("admin api: throttling a client after repeated token failures: its requests are answered 429 until it may try again",
					"client", key, "retry_after", v.wait.Round(time.Millisecond))
			}
			refuse(w, http.StatusTooManyRequests, v.wait)
			return
		}
		// The scheme is case-insensitive (RFC 9110 §11.1).
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		gotSum := sha256.Sum256([]byte(got))
		right := strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(gotSum[:], want[:]) == 1
		if right {
			lim.refund(key)
			if v.throttle {
				logger.Info("admin api: a throttled client sent the right token", "client", key, "refused_meanwhile", v.refused)
			}
			next.ServeHTTP(w, r)
			return
		}
		why := "wrong bearer token"
		if r.Header.Get("Authorization") == "" {
			why = "no bearer token"
		} else if !strings.EqualFold(scheme, "Bearer") {
			why = "not a bearer token"
		}
		attrs := []any{"client", key, "reason", why, "method", r.Method, "path", r.URL.Path, "attempts_left", v.left}
		if v.throttle {
			attrs = append(attrs, "refused_meanwhile", v.refused)
		}
		logger.Warn("admin api: refused a request", attrs...)
		refuse(w, http.StatusUnauthorized, 0)
	})
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
