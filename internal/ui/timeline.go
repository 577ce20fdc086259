package ui

import (
	"fmt"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// step is one row of a job's timeline, as the page shows it.
type step struct {
	At     time.Time
	Kind   store.EventKind
	What   string
	Took   string
	Result string
	Detail string
	Next   string
}

// timeline is api.Timeline with the page's durations.
func timeline(history []store.Event) []step {
	rows := api.Timeline(history)
	out := make([]step, len(rows))
	for i, r := range rows {
		s := step{At: r.At, Kind: r.Kind, What: r.What, Took: "-", Result: r.Result, Detail: r.Detail}
		switch {
		case r.EndUnknown:
			s.Took = "end unknown"
		case r.Ended:
			s.Took = dur(r.Took)
		}
		if r.Delay > 0 || r.DelayReason != "" {
			s.Next = fmt.Sprintf("wait %s (%s)", dur(r.Delay), r.DelayReason)
		}
		out[i] = s
	}
	return out
}
