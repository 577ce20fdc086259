package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemrun/idemrun/store"
)

// step is one row of a job's timeline.
type step struct {
	At     time.Time
	Kind   store.EventKind
	What   string
	Took   string
	Result string
	Detail string
	Next   string
}

// timeline is a job's history as rows: attempts with their class and
// answer, status queries with their outcome, recoveries and a person's
// actions with who and why, and the wait each decided.
func timeline(history []store.Event) []step {
	// An attempt a recovery closed ended when the recovery ran, which is
	// not when the attempt ended: nobody saw that.
	type mark struct {
		n  int
		at int64
	}
	recovered := map[mark]bool{}
	for _, e := range history {
		if e.Kind == store.EventRecovery {
			recovered[mark{e.N, e.Start.UnixNano()}] = true
		}
	}
	out := make([]step, 0, len(history))
	for _, e := range history {
		s := step{At: e.Start, Kind: e.Kind, What: string(e.Kind), Took: "-"}
		switch {
		case e.Kind == store.EventAttempt && !e.End.IsZero() && recovered[mark{e.N, e.End.UnixNano()}]:
			s.Took = "end unknown"
		case !e.End.IsZero():
			s.Took = dur(e.End.Sub(e.Start))
		}
		switch e.Kind {
		case store.EventAttempt:
			s.What = fmt.Sprintf("attempt %d", e.N)
			s.Result = e.Class
			if e.End.IsZero() {
				s.Result = "in flight"
			}
			if e.HTTPStatus != 0 {
				s.Result += fmt.Sprintf(" %d", e.HTTPStatus)
			}
			s.Detail = e.Error
			if e.RetryAfter != "" {
				s.Detail += " [Retry-After: " + e.RetryAfter + "]"
			}
			if e.Replayed != "" {
				s.Detail += " [Idempotent-Replayed: " + e.Replayed + "]"
			}
		case store.EventStatusQuery:
			s.What = fmt.Sprintf("status query %d", e.N)
			s.Result = e.Outcome
			if e.HTTPStatus != 0 {
				s.Result += fmt.Sprintf(" %d", e.HTTPStatus)
			}
			s.Detail = strings.TrimSpace(e.Detail + " " + e.Error)
		case store.EventManual:
			s.What = "manual action"
			s.Result = fmt.Sprintf("%s → %s", e.From, e.To)
			s.Detail = fmt.Sprintf("by %s: %s", e.Actor, e.Note)
		case store.EventRecovery:
			s.Result = fmt.Sprintf("%s → %s", e.From, e.To)
			s.Detail = e.Detail
		case store.EventSchedule:
			s.Detail = e.Detail
		}
		if e.Delay > 0 || e.DelayReason != "" {
			s.Next = fmt.Sprintf("wait %s (%s)", dur(e.Delay), e.DelayReason)
		}
		s.Detail = strings.TrimSpace(s.Detail)
		out = append(out, s)
	}
	return out
}
