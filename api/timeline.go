package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemrun/idemrun/store"
)

// TimelineStep is one row of a job's history as `idemrun show` and the
// dashboard present it; each formats the durations its own way.
type TimelineStep struct {
	At     time.Time
	Kind   store.EventKind
	What   string // "attempt 2", "status query 1", "manual", "recovery", …
	Result string // class and status, outcome, or "from → to"
	Detail string
	// Took is how long the step took, when Ended. EndUnknown marks an
	// attempt a recovery closed: it ended when the recovery ran, which
	// is not when the attempt ended, and nobody saw that.
	Took       time.Duration
	Ended      bool
	EndUnknown bool
	// Delay and DelayReason are the wait the step decided, if any.
	Delay       time.Duration
	DelayReason string
}

// Timeline turns a job's history into rows: attempts with their class
// and answer, status queries with their outcome, recoveries and a
// person's actions with who and why, and the wait each decided.
func Timeline(history []store.Event) []TimelineStep {
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
	out := make([]TimelineStep, 0, len(history))
	for _, e := range history {
		s := TimelineStep{At: e.Start, Kind: e.Kind, What: string(e.Kind), Delay: e.Delay, DelayReason: e.DelayReason}
		if !e.End.IsZero() {
			s.Ended, s.Took = true, e.End.Sub(e.Start)
			s.EndUnknown = e.Kind == store.EventAttempt && recovered[mark{e.N, e.End.UnixNano()}]
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
			s.Detail = e.Detail + " " + e.Error
		case store.EventManual:
			s.What = "manual"
			s.Result = fmt.Sprintf("%s → %s", e.From, e.To)
			s.Detail = fmt.Sprintf("by %s: %s", e.Actor, e.Note)
		case store.EventRecovery:
			s.Result = fmt.Sprintf("%s → %s", e.From, e.To)
			s.Detail = e.Detail
		case store.EventSchedule:
			s.Detail = e.Detail
		}
		s.Detail = strings.TrimSpace(s.Detail)
		out = append(out, s)
	}
	return out
}
