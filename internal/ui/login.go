package ui

import (
	"net/http"

	"github.com/idemrun/idemrun/admin"
)

// loginData is the login page.
type loginData struct {
	Next string
}

// login shows the login form; admin.Protect takes what it sends.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	msg := ""
	switch {
	case q.Get("failed") != "":
		msg = "That token is not the admin token."
	case q.Get("wait") != "":
		msg = "Too many wrong tokens from this address: try again in " + q.Get("wait") + " s."
	case q.Get("expired") != "":
		msg = "The login form expired; send it again."
	}
	status := http.StatusOK
	if msg != "" {
		status = http.StatusUnauthorized
	}
	if admin.UIAuthFrom(r.Context()).CSRF == "" {
		// No token to log in with: the unix socket, or bearer requests.
		http.Redirect(w, r, admin.UIPath, http.StatusSeeOther)
		return
	}
	s.render(w, r, status, "login", page{Title: "Log in", Error: msg, Data: loginData{Next: q.Get("next")}})
}
