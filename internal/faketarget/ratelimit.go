package faketarget

import (
	"time"
)

// postTimes is when POSTs arrived, and when those the rate limit took
// were taken, for RateLimit and MaxPostsPerSecond.
type postTimes struct {
	arrivals []time.Time
	taken    []time.Time // within the last second
}

// arrived counts a POST and records when it came.
func (s *Server) arrived() {
	s.mu.Lock()
	now := time.Now()
	s.counters.Posts++
	s.posts.arrivals = append(s.posts.arrivals, now)
	s.signalLocked()
	s.mu.Unlock()
}

// underLimit takes a create under a limit of perSec in any one second,
// or reports false when the last second already took perSec.
func (s *Server) underLimit(perSec int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	t := s.posts.taken
	i := 0
	for i < len(t) && now.Sub(t[i]) >= time.Second {
		i++
	}
	t = t[i:]
	if len(t) >= perSec {
		s.posts.taken = t
		return false
	}
	s.posts.taken = append(t, now)
	return true
}

// MaxPostsPerSecond returns the most POSTs that arrived in any one-second
// window.
func (s *Server) MaxPostsPerSecond() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.posts.arrivals
	most, j := 0, 0
	for i := range a {
		for a[i].Sub(a[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}
