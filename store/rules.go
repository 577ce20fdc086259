package store

import (
	"bytes"
	"slices"
	"time"
)

// KeyFormatOf is j's key format with the default spelled one way ("" and
// "token" are both the token format); every comparison of key formats
// goes through it.
func KeyFormatOf(j *Job) string {
	if j.KeyFormat == "token" {
		return ""
	}
	return j.KeyFormat
}

// SameRequest reports whether a and b send the same bytes with the same
// key: method, URL, headers in order, body, fingerprint and key format.
func SameRequest(a, b *Job) bool {
	return a.Request.Method == b.Request.Method && a.Request.URL == b.Request.URL &&
		slices.Equal(a.Request.Header, b.Request.Header) && bytes.Equal(a.Request.Body, b.Request.Body) &&
		a.Fingerprint == b.Fingerprint && KeyFormatOf(a) == KeyFormatOf(b)
}

// ActorOr is the actor recorded for a manual action: a, or "unknown".
func ActorOr(a string) string {
	if a == "" {
		return "unknown"
	}
	return a
}

// Manual records a person's action on j (cancel, retry, resolve) and
// moves it to state to.
func Manual(j *Job, now time.Time, to State, actor, note string) {
	j.AddEvent(Event{Kind: EventManual, Start: now, From: j.State, To: to, Actor: ActorOr(actor), Note: note})
	j.State = to
	j.UpdatedAt = now
}

// Rescued (every backend's Rescue, before its fn) returns the unknown form of a running job whose runner is gone:
// a new fence, so the old claim's late outcome is refused, and a status
// query due now.
func Rescued(old *Job, now time.Time) *Job {
	j := old.Clone()
	j.State = StateUnknown
	j.Fence++
	j.MayHaveEffect = true
	j.UpdatedAt = now
	if j.UnknownSince.IsZero() {
		j.UnknownSince = now
		j.StatusBase = j.StatusQueries
	}
	j.NextRunAt = now
	return j
}
