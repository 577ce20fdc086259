package admin

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// DefaultSessionTTL is how long a dashboard login lasts when
// Options.SessionTTL is not set.
const DefaultSessionTTL = 12 * time.Hour

// maxSessions bounds the logins kept; a login beyond it ends the one
// closest to its expiry.
const maxSessions = 1024

// session is one dashboard login, kept only in this process: a restart
// logs everyone out.
type session struct {
	csrf    string
	expires time.Time
}

// sessions holds the logins by their random id (the cookie's value).
type sessions struct {
	mu  sync.Mutex
	now func() time.Time
	ttl time.Duration
	m   map[string]session
}

func newSessions(now func() time.Time, ttl time.Duration) *sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessions{now: now, ttl: ttl, m: make(map[string]session)}
}

// randomToken is 32 random bytes in hex.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}

// start makes a session and returns its id and CSRF token.
func (s *sessions) start() (id, csrf string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= maxSessions {
		var victim string
		var soonest time.Time
		for k, v := range s.m {
			if !v.expires.After(now) {
				delete(s.m, k)
				continue
			}
			if victim == "" || v.expires.Before(soonest) {
				victim, soonest = k, v.expires
			}
		}
		if len(s.m) >= maxSessions {
			delete(s.m, victim)
		}
	}
	id, csrf = randomToken(), randomToken()
	s.m[id] = session{csrf: csrf, expires: now.Add(s.ttl)}
	return id, csrf
}

// get returns the live session with this id.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if ok && !v.expires.After(s.now()) {
		delete(s.m, id)
		return session{}, false
	}
	return v, ok
}

// end forgets a session.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}
