package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// renderOf is show's text for j.
func renderOf(t *testing.T, j *api.Job) string {
	t.Helper()
	var buf bytes.Buffer
	if err := renderJob(&buf, j); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// An attempt that a recovery closed shows no duration: it ended when
// the recovery ran, not when the attempt did, which nobody saw.
func TestRenderJobRecoveredAttempt(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	recovered := sent.Add(42 * time.Second)
	j := &api.Job{ID: "j1", Key: "k", State: store.StateUnknown, Method: "POST", URL: "http://h/x", History: []store.Event{
		{Kind: store.EventAttempt, N: 1, Start: sent, End: recovered, Class: "unknown", Error: "runner stopped while in flight"},
		{Kind: store.EventRecovery, N: 1, Start: recovered, From: store.StateRunning, To: store.StateUnknown, Detail: "attempt 1 was in flight when its runner stopped"},
		{Kind: store.EventAttempt, N: 2, Start: recovered.Add(time.Second), End: recovered.Add(1250 * time.Millisecond), Class: "succeeded", HTTPStatus: 201},
	}}
	out := renderOf(t, j)
	var first, second string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, ".000  attempt 1 "):
			first = l
		case strings.Contains(l, ".000  attempt 2 "):
			second = l
		}
	}
	if !strings.Contains(first, "end unknown") || strings.Contains(first, "42s") {
		t.Errorf("the recovered attempt's line: %q, want \"end unknown\" and no duration\n%s", first, out)
	}
	if !strings.Contains(second, "250ms") {
		t.Errorf("the next attempt's line: %q, want its duration 250ms", second)
	}
}

// show gives a next run only to the jobs that run again by themselves.
func TestRenderJobNextRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		state store.State
		next  bool
	}{
		{store.StatePending, true}, {store.StateUnknown, true},
		{store.StateSucceeded, false}, {store.StateFailed, false}, {store.StateCanceled, false}, {store.StateNeedsAttention, false},
	} {
		out := renderOf(t, &api.Job{ID: "j1", Key: "k", State: tc.state, Method: "POST", URL: "http://h/x", NextRunAt: time.Now()})
		if got := strings.Contains(out, "next run"); got != tc.next {
			t.Errorf("show of a %s job: next run shown %v, want %v\n%s", tc.state, got, tc.next, out)
		}
	}
}

// show counts status queries in good English.
func TestRenderJobStatusQueries(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "(0 queries)", 1: "(1 query)", 2: "(2 queries)"} {
		out := renderOf(t, &api.Job{ID: "j1", Key: "k", State: store.StateUnknown, Method: "POST", URL: "http://h/x", StatusURL: "http://h/s?k={key}", StatusQueries: n})
		if !strings.Contains(out, want) {
			t.Errorf("show with %d status queries:\n%s\nwant %q", n, out, want)
		}
	}
}

// list's LAST column: the last attempt's status or class, and "found"
// for a job a status query settled, whose last attempt's class is the
// "unknown" the query answered.
func TestLastOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		j    api.Job
		want string
	}{
		{api.Job{State: store.StateSucceeded, LastClass: "unknown", SettledBy: "status_query"}, "found"},
		{api.Job{State: store.StateFailed, LastClass: "unknown", SettledBy: "status_query"}, "found"},
		{api.Job{State: store.StateSucceeded, LastStatus: 201, LastClass: "succeeded", SettledBy: "attempt"}, "201"},
		{api.Job{State: store.StateUnknown, LastClass: "unknown"}, "unknown"},
		{api.Job{State: store.StatePending}, "-"},
	} {
		if got := lastOf(&tc.j); got != tc.want {
			t.Errorf("lastOf(%s, class %q, status %d) = %q, want %q", tc.j.State, tc.j.LastClass, tc.j.LastStatus, got, tc.want)
		}
	}
}

// list itself says "found" for a job a status query settled: the list's
// jobs carry what settled them.
func TestListLastFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "found-1")
	c, err := api.Open(e.db, &api.Options{Direct: true, Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().Add(time.Second)
	claims, err := c.Store().ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	// The attempt's outcome was unknown; a status query found the effect.
	if _, _, err := c.Store().FinishClaim(ctx, claims[0], func(j *store.Job) error {
		j.State, j.LastClass, j.UpdatedAt = store.StateSucceeded, "unknown", now
		j.Result = &store.Result{HTTPStatus: 200, Source: "status_query"}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r := e.ok("list")
	if f := strings.Fields(lineWith(t, r.stdout, "found-1")); len(f) < 4 || f[3] != "found" {
		t.Errorf("list's LAST for a job a status query settled:\n%s\nwant found", r.stdout)
	}
	if j := jsonArray(t, e.ok("list", "--json"))[0]; j["settled_by"] != "status_query" {
		t.Errorf("list --json: settled_by %v, want status_query", j["settled_by"])
	}
}

// lineWith is the line of out that holds s.
func lineWith(t *testing.T, out, s string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	t.Fatalf("no line with %q in:\n%s", s, out)
	return ""
}
