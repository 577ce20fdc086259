package api_test

import (
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// An attempt a recovery closed has no known end; the others show what
// they took, their result and the wait they decided.
func TestTimeline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rec := t0.Add(time.Minute)
	rows := api.Timeline([]store.Event{
		{Kind: store.EventAttempt, N: 1, Start: t0, End: t0.Add(20 * time.Millisecond), Class: "retryable", HTTPStatus: 503, RetryAfter: "2", Delay: 2 * time.Second, DelayReason: "Retry-After"},
		{Kind: store.EventAttempt, N: 2, Start: t0.Add(3 * time.Second), End: rec},
		{Kind: store.EventRecovery, N: 2, Start: rec, From: store.StateRunning, To: store.StateUnknown, Detail: "runner stopped"},
		{Kind: store.EventStatusQuery, N: 1, Start: rec.Add(time.Second), End: rec.Add(time.Second + 5*time.Millisecond), Outcome: "found", HTTPStatus: 200, Detail: " created "},
		{Kind: store.EventManual, Start: rec.Add(time.Hour), From: store.StateNeedsAttention, To: store.StateSucceeded, Actor: "ana", Note: "checked"},
	})
	want := []api.TimelineStep{
		{What: "attempt 1", Result: "retryable 503", Detail: "[Retry-After: 2]", Ended: true, Took: 20 * time.Millisecond, Delay: 2 * time.Second, DelayReason: "Retry-After"},
		{What: "attempt 2", Ended: true, EndUnknown: true},
		{What: "recovery", Result: "running → unknown", Detail: "runner stopped"},
		{What: "status query 1", Result: "found 200", Detail: "created", Ended: true, Took: 5 * time.Millisecond},
		{What: "manual", Result: "needs_attention → succeeded", Detail: "by ana: checked"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.What != w.What || r.Result != w.Result || r.Detail != w.Detail || r.Ended != w.Ended || r.EndUnknown != w.EndUnknown ||
			(w.Took != 0 && r.Took != w.Took) || r.Delay != w.Delay || r.DelayReason != w.DelayReason {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
}
