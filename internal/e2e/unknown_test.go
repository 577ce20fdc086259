package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// The target commits, then drops the connection: the runner asks the status
// endpoint, finds the payment and never sends again. Keys that need escaping
// in the status URL path reach the target intact.
func TestLostResponseSettledByStatusQuery(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"lost-response-1", "order/42?x=1&y#z%2F", "a//b", "..."} {
		t.Run(k, func(t *testing.T) {
			t.Parallel()
			c := openClient(t)
			ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{LoseResponse: 1})
			body := []byte(`{"amount":1200}`)
			enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

			runUntilIdle(t, c, baseConfig())

			j := jobByKey(t, c, k)
			if got, want := ft.fake.Creates(k), 1; got != want {
				t.Errorf("creates at the target = %d, want %d", got, want)
			}
			if got, want := len(ft.postsFor(k)), 1; got != want {
				t.Errorf("POSTs received = %d, want %d (no replay after a lost response)", got, want)
			}
			if got, want := ft.fake.Requests().Faults.LoseResponse, 1; got != want {
				t.Errorf("responses lost by the target = %d, want %d", got, want)
			}
			if got := ft.queriesFor(k); got < 1 {
				t.Errorf("status queries received for %q = %d, want at least 1", k, got)
			}
			if j.State != store.StateSucceeded {
				t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
			}
			if got := outcomesOf(j); !slices.Contains(got, string(statusquery.FoundSucceeded)) {
				t.Errorf("status query outcomes = %q, want one %q", got, statusquery.FoundSucceeded)
			}
			if got, want := eventsOf(j, store.EventAttempt)[0].Class, string(runner.ClassUnknown); got != want {
				t.Errorf("attempt 1 class = %q, want %q", got, want)
			}
			if j.Result == nil || j.Result.Source != "status_query" {
				t.Errorf("result = %+v, want source status_query", j.Result)
			}
			if j.MayHaveEffect {
				t.Errorf("may_have_effect still set on a succeeded job")
			}
		})
	}
}

// The target commits only after the attempt timed out; meanwhile its status
// endpoint says "processing". The runner keeps asking and never replays.
func TestSlowCommitWaitsForStatus(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	// The commit would take 30 s; the hook below commits it as soon as the
	// runner has recorded an "in progress" answer, so the test proves the
	// wait without sleeping through it.
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{SlowCommit: 1, SlowCommitDelay: 30 * time.Second})
	const k = "slow-commit-1"
	body := []byte(`{"amount":700}`)
	enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 200 * time.Millisecond, MaxAttempts: 3})

	var once sync.Once
	var inFlightAtCommit atomic.Int64
	cfg := baseConfig()
	cfg.OnWrite = func(j *store.Job) {
		if e := j.LastEvent(store.EventStatusQuery); e != nil && e.Outcome == string(statusquery.InProgress) {
			once.Do(func() {
				inFlightAtCommit.Store(int64(ft.fake.InFlight(k)))
				ft.fake.CommitInFlight()
			})
		}
	}
	runUntilIdle(t, c, cfg)

	j := jobByKey(t, c, k)
	if got, want := inFlightAtCommit.Load(), int64(1); got != want {
		t.Errorf("slow creates in flight when the runner saw \"processing\" = %d, want %d", got, want)
	}
	if got, want := ft.fake.Creates(k), 1; got != want {
		t.Errorf("creates at the target = %d, want %d", got, want)
	}
	if got, want := len(ft.postsFor(k)), 1; got != want {
		t.Errorf("POSTs received = %d, want %d (never replay while in progress)", got, want)
	}
	if j.State != store.StateSucceeded {
		t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
	}
	outs := outcomesOf(j)
	if n := countOf(outs, string(statusquery.InProgress)); n < 1 {
		t.Errorf("status query outcomes = %q, want at least one %q", outs, statusquery.InProgress)
	}
	if len(outs) == 0 || outs[len(outs)-1] != string(statusquery.FoundSucceeded) {
		t.Errorf("status query outcomes = %q, want the last %q", outs, statusquery.FoundSucceeded)
	}
	if got, want := eventsOf(j, store.EventAttempt)[0].Class, string(runner.ClassUnknown); got != want {
		t.Errorf("attempt 1 class = %q, want %q (timed out after sending)", got, want)
	}
	if j.Result == nil || j.Result.Source != "status_query" {
		t.Errorf("result = %+v, want source status_query", j.Result)
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// The connection is dropped before the target handles the request: the
// status endpoint says 404, and the replay carries the same key and the
// same bytes; exactly one payment exists.
func TestDroppedBeforeHandlingReplaysSameBytes(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{DropBeforeHandling: 1})
	const k = "dropped-1"
	body := []byte(`{"amount":1500,"currency":"EUR","memo":"naïve café"}`)
	enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateSucceeded {
		t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
	}
	if got, want := ft.fake.Creates(k), 1; got != want {
		t.Errorf("creates at the target = %d, want %d", got, want)
	}
	if got, want := ft.fake.Requests().Faults.DropBeforeHandling, 1; got != want {
		t.Errorf("drops at the target = %d, want %d", got, want)
	}
	posts := ft.postsFor(k)
	if got, want := len(posts), 2; got != want {
		t.Fatalf("POSTs received = %d, want %d (the dropped one and its replay)", got, want)
	}
	checkSameRequest(t, posts, k, body)
	if got := ft.fake.BodiesByKey(k); len(got) != 1 || !bytes.Equal(got[0], body) {
		t.Errorf("bodies the target handled = %q, want exactly [%q]", got, body)
	}
	first := eventsOf(j, store.EventAttempt)[0]
	switch first.Class {
	case string(runner.ClassUnknown):
		// Headers went out: only a "not found" may have allowed the replay.
		if got := outcomesOf(j); !slices.Contains(got, string(statusquery.NotFound)) {
			t.Errorf("attempt 1 was unknown but status outcomes = %q, want a %q before the replay", got, statusquery.NotFound)
		}
	case string(runner.ClassNoEffect):
	default:
		t.Errorf("attempt 1 class = %q, want unknown or no_effect", first.Class)
	}
}

// The target commits, then a gateway answers 500, 502 or 504: the outcome is
// unknown, the status query finds the payment, nothing is replayed.
func TestCommitThenServerError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		faults faketarget.Faults
		status int
	}{
		{"500", faketarget.Faults{CommitThen500: 1}, 500},
		{"502", faketarget.Faults{CommitThen502: 1}, 502},
		{"504", faketarget.Faults{CommitThen504: 1}, 504},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := openClient(t)
			ft := newFakeTarget(t, faketarget.Config{}, tt.faults)
			k := "commit-then-" + tt.name
			body := []byte(`{"amount":42}`)
			enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

			runUntilIdle(t, c, baseConfig())

			j := jobByKey(t, c, k)
			if j.State != store.StateSucceeded {
				t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
			}
			if got, want := ft.fake.Creates(k), 1; got != want {
				t.Errorf("creates at the target = %d, want %d", got, want)
			}
			if got, want := len(ft.postsFor(k)), 1; got != want {
				t.Errorf("POSTs received = %d, want %d", got, want)
			}
			first := eventsOf(j, store.EventAttempt)[0]
			if first.HTTPStatus != tt.status || first.Class != string(runner.ClassUnknown) {
				t.Errorf("attempt 1 = %d %q, want %d %q", first.HTTPStatus, first.Class, tt.status, runner.ClassUnknown)
			}
			if got := outcomesOf(j); !slices.Equal(got, []string{string(statusquery.FoundSucceeded)}) {
				t.Errorf("status query outcomes = %q, want [%q]", got, statusquery.FoundSucceeded)
			}
			if j.Result == nil || j.Result.Source != "status_query" {
				t.Errorf("result = %+v, want source status_query", j.Result)
			}
		})
	}
}

// Thirty jobs against a target that loses responses while its status
// endpoint answers 503 or hangs half the time: no duplicates, every job
// ends settled or parked, and no job is queried more than its budget
// allows.
func TestFlakyStatusWithLostResponses(t *testing.T) {
	t.Parallel()
	const (
		jobs   = 30
		budget = 4
	)
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{Seed: 7, Faults: faketarget.Faults{
		LoseResponse: 0.4,
		FlakyStatus:  0.5,
		// Longer than the checker's 300 ms: a hang is a timeout, no answer.
		StatusHang: 400 * time.Millisecond,
	}})
	keys := make([]string, jobs)
	for i := range keys {
		keys[i] = fmt.Sprintf("flaky-%02d", i)
		body := fmt.Appendf(nil, `{"amount":%d}`, 100+i)
		enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: keys[i], StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})
	}
	cfg := baseConfig()
	cfg.StatusBudget = budget
	runUntilIdle(t, c, cfg)

	if d := ft.fake.Duplicates(); len(d) != 0 {
		t.Errorf("duplicates at the target: %q", d)
	}
	lost := ft.fake.Requests().Faults.LoseResponse
	if lost == 0 {
		t.Errorf("no response was lost; the test exercised nothing")
	}
	counts := map[store.State]int{}
	for _, k := range keys {
		j := jobByKey(t, c, k)
		counts[j.State]++
		if !j.State.Terminal() && j.State != store.StateNeedsAttention {
			t.Errorf("job %s: state %s, want terminal or needs_attention", k, j.State)
		}
		if j.State == store.StateFailed {
			t.Errorf("job %s failed, though every attempt reached a committing target\n%s", k, describe(j))
		}
		if j.StatusQueries > budget+1 {
			t.Errorf("job %s: %d status queries, want at most %d", k, j.StatusQueries, budget+1)
		}
		if got := ft.queriesFor(k); got > budget+1 {
			t.Errorf("job %s: the target received %d status queries, want at most %d", k, got, budget+1)
		}
		if got, want := len(ft.postsFor(k)), 1; got != want {
			t.Errorf("job %s: %d POSTs, want %d (never replay an unknown outcome without not_found)", k, got, want)
		}
		if got, want := ft.fake.Creates(k), 1; got != want {
			t.Errorf("job %s: %d creates, want %d", k, got, want)
		}
		if j.State == store.StateNeedsAttention && !strings.Contains(j.Reason, "status budget") {
			t.Errorf("job %s: needs_attention reason %q, want it to name the status budget", k, j.Reason)
		}
	}
	t.Logf("lost responses: %d, states: %v, target: %+v", lost, counts, ft.fake.Requests().Faults)
}

// The status endpoint lists two payments under the key: idemrun parks the
// job for a person instead of claiming success.
func TestStatusFindsDuplicate(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	// POST 1 is someone else's create with the same key; POST 2 is the
	// job's, committed and then lost.
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{}, faketarget.Faults{LoseResponse: 1})
	const k = "dup-1"
	body := []byte(`{"amount":9}`)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ft.PaymentsURL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(idemkey.HeaderName, k)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("pre-POST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("pre-POST status = %d, want 201", resp.StatusCode)
	}
	enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateNeedsAttention {
		t.Fatalf("state = %s, want needs_attention\n%s", j.State, describe(j))
	}
	if !strings.Contains(j.Reason, "duplicate") {
		t.Errorf("reason = %q, want it to contain %q", j.Reason, "duplicate")
	}
	if got := outcomesOf(j); !slices.Equal(got, []string{string(statusquery.Duplicate)}) {
		t.Errorf("status query outcomes = %q, want [%q]", got, statusquery.Duplicate)
	}
	if got, want := len(ft.postsFor(k)), 2; got != want {
		t.Errorf("POSTs received = %d, want %d (the pre-POST and one attempt)", got, want)
	}
	if got, want := ft.fake.Creates(k), 2; got != want {
		t.Errorf("creates at the target = %d, want %d", got, want)
	}
	if !j.MayHaveEffect {
		t.Errorf("may_have_effect cleared on a job parked for a duplicate")
	}
}

// No status URL and no key TTL: a lost response leaves the job for a
// person, and the target saw exactly one request.
func TestLostResponseWithoutStatusOrTTL(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{LoseResponse: 1})
	const k = "no-status-1"
	body := []byte(`{"amount":5}`)
	job := enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, AttemptTimeout: 2 * time.Second, MaxAttempts: 5})

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateNeedsAttention || j.ID != job.ID {
		t.Fatalf("job %s: state = %s, want job %s in needs_attention\n%s", j.ID, j.State, job.ID, describe(j))
	}
	if want := "a person must check with the target, then resolve the job as succeeded or failed"; !strings.Contains(j.Reason, want) || strings.Contains(j.Reason, "idemrun resolve") {
		t.Errorf("reason = %q, want it to contain %q and name no CLI command (the CLI adds it)", j.Reason, want)
	}
	if got, want := ft.totalPosts(), 1; got != want {
		t.Errorf("POSTs received = %d, want %d", got, want)
	}
	if got, want := ft.fake.Requests().StatusQueries, 0; got != want {
		t.Errorf("status queries received = %d, want %d", got, want)
	}
	if got, want := ft.fake.Creates(k), 1; got != want {
		t.Errorf("creates at the target = %d, want %d", got, want)
	}
}

// Without a status URL but with a key TTL and a deduplicating target, an
// unknown outcome is replayed with the same key; the target answers with
// the stored payment.
func TestLostResponseReplayedInsideKeyTTL(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{LoseResponse: 1})
	ft.fake.SetDedup(true)
	const k = "ttl-1"
	body := []byte(`{"amount":77}`)
	enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, KeyTTL: time.Hour, AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateSucceeded {
		t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
	}
	if got, want := ft.fake.Creates(k), 1; got != want {
		t.Errorf("creates at the target = %d, want %d", got, want)
	}
	posts := ft.postsFor(k)
	if got, want := len(posts), 2; got != want {
		t.Fatalf("POSTs received = %d, want %d", got, want)
	}
	checkSameRequest(t, posts, k, body)
	att := eventsOf(j, store.EventAttempt)
	if len(att) != 2 {
		t.Fatalf("attempt events = %d, want 2\n%s", len(att), describe(j))
	}
	if att[0].Class != string(runner.ClassUnknown) {
		t.Errorf("attempt 1 class = %q, want %q", att[0].Class, runner.ClassUnknown)
	}
	if att[1].HTTPStatus != http.StatusCreated || att[1].Replayed != "true" {
		t.Errorf("attempt 2 = %d Idempotent-Replayed %q, want 201 %q", att[1].HTTPStatus, att[1].Replayed, "true")
	}
	if got := eventsOf(j, store.EventStatusQuery); len(got) != 0 {
		t.Errorf("status query events = %d, want 0 (no status URL)", len(got))
	}
	if j.Result == nil || j.Result.Source != "attempt" {
		t.Errorf("result = %+v, want source attempt", j.Result)
	}
}

// A 409 ("in progress") is never a permanent failure and does not use up
// the attempt budget.
func TestConflictIsInProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		posts    []postStep
		statuses []statusStep
		// want
		postsWant int // POSTs the target received
		outcomes  []statusquery.Outcome
		wantTries int
	}{
		{
			// The earlier request with this key finishes while the runner
			// waits: no new send at all.
			name:      "earlier request finishes",
			posts:     []postStep{answer409},
			statuses:  []statusStep{processing, createThenTruth},
			postsWant: 1,
			outcomes:  []statusquery.Outcome{statusquery.InProgress, statusquery.FoundSucceeded},
			wantTries: 1,
		},
		{
			// With MaxAttempts 2: 409 (free), 500 without effect, then a
			// create whose answer is lost. If the 409 counted, the second
			// "not found" would end the job failed with no attempts left.
			name:      "409 does not use the budget",
			posts:     []postStep{answer409, fail500, createThenDrop},
			statuses:  []statusStep{processing},
			postsWant: 3,
			outcomes:  []statusquery.Outcome{statusquery.InProgress, statusquery.NotFound, statusquery.NotFound, statusquery.FoundSucceeded},
			wantTries: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := openClient(t)
			st := newScriptTarget(t, tt.posts, tt.statuses)
			const k = "conflict-1"
			body := []byte(`{"amount":409}`)
			enqueue(t, c, st.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: st.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 2})

			runUntilIdle(t, c, baseConfig())

			j := jobByKey(t, c, k)
			if j.State != store.StateSucceeded {
				t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
			}
			if got, want := st.Creates(k), 1; got != want {
				t.Errorf("creates at the target = %d, want %d", got, want)
			}
			posts := st.postsFor(k)
			if got := len(posts); got != tt.postsWant {
				t.Errorf("POSTs received = %d, want %d", got, tt.postsWant)
			}
			checkSameRequest(t, posts, k, body)
			if j.Attempts != tt.wantTries {
				t.Errorf("attempts = %d, want %d", j.Attempts, tt.wantTries)
			}
			att := eventsOf(j, store.EventAttempt)
			if att[0].HTTPStatus != http.StatusConflict || att[0].Class != string(runner.ClassInProgress) {
				t.Errorf("attempt 1 = %d %q, want 409 %q", att[0].HTTPStatus, att[0].Class, runner.ClassInProgress)
			}
			for i, e := range att {
				if e.Class == string(runner.ClassPermanent) {
					t.Errorf("attempt %d classified permanent: %+v", i+1, e)
				}
			}
			want := make([]string, len(tt.outcomes))
			for i, o := range tt.outcomes {
				want[i] = string(o)
			}
			if got := outcomesOf(j); !slices.Equal(got, want) {
				t.Errorf("status query outcomes = %q, want %q", got, want)
			}
		})
	}
}

// A custom checker drives each status outcome through the runner.
func TestCheckerOutcomes(t *testing.T) {
	t.Parallel()
	const budget = 3
	declined := []byte(`{"status":"declined","reason":"card expired"}`)
	tests := []struct {
		name  string
		posts []postStep
		// answers are the checker's answers by call; past the end the last
		// one repeats.
		answers []statusquery.Answer

		state       store.State
		reasonHas   string
		postsWant   int
		createsWant int
		// queries bounds the checker calls: exactly this many, or at most
		// this many when maxQueries is set.
		queries    int
		maxQueries bool
		source     string
		resultBody []byte
	}{
		{
			name:        "found_succeeded",
			posts:       []postStep{createThenDrop},
			answers:     []statusquery.Answer{{Outcome: statusquery.FoundSucceeded, HTTPStatus: 200, Body: []byte(`{"status":"succeeded"}`), Detail: "found"}},
			state:       store.StateSucceeded,
			postsWant:   1,
			createsWant: 1,
			queries:     1,
			source:      "status_query",
			resultBody:  []byte(`{"status":"succeeded"}`),
		},
		{
			name:        "found_failed",
			posts:       []postStep{dropNoCreate},
			answers:     []statusquery.Answer{{Outcome: statusquery.FoundFailed, HTTPStatus: 200, Body: declined, Detail: `status "declined"`}},
			state:       store.StateFailed,
			reasonHas:   "failed",
			postsWant:   1,
			createsWant: 0,
			queries:     1,
			source:      "status_query",
			resultBody:  declined,
		},
		{
			name:        "not_found",
			posts:       []postStep{dropNoCreate},
			answers:     []statusquery.Answer{{Outcome: statusquery.NotFound, HTTPStatus: 404, Detail: "404 not found"}},
			state:       store.StateSucceeded,
			postsWant:   2,
			createsWant: 1,
			queries:     1,
			source:      "attempt",
		},
		{
			name:  "in_progress",
			posts: []postStep{createThenDrop},
			answers: []statusquery.Answer{
				{Outcome: statusquery.InProgress, HTTPStatus: 200, Detail: `status "processing"`},
				{Outcome: statusquery.FoundSucceeded, HTTPStatus: 200, Detail: "found"},
			},
			state:       store.StateSucceeded,
			postsWant:   1,
			createsWant: 1,
			queries:     2,
			source:      "status_query",
		},
		{
			name:        "duplicate",
			posts:       []postStep{createThenDrop},
			answers:     []statusquery.Answer{{Outcome: statusquery.Duplicate, HTTPStatus: 200, Body: []byte(`{"data":[{},{}]}`), Detail: "2 items"}},
			state:       store.StateNeedsAttention,
			reasonHas:   "duplicate",
			postsWant:   1,
			createsWant: 1,
			queries:     1,
		},
		{
			name:        "no_answer forever",
			posts:       []postStep{createThenDrop},
			answers:     []statusquery.Answer{{Outcome: statusquery.NoAnswer, Detail: "checker down"}},
			state:       store.StateNeedsAttention,
			reasonHas:   "status budget",
			postsWant:   1,
			createsWant: 1,
			queries:     budget + 1,
			maxQueries:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := openClient(t)
			st := newScriptTarget(t, tt.posts, nil)
			k := "checker-" + strings.ReplaceAll(tt.name, " ", "-")
			body := []byte(`{"amount":3}`)
			job := enqueue(t, c, st.PaymentsURL(), body, api.EnqueueOptions{Key: k, AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

			var mu sync.Mutex
			var calls int
			var seen []statusquery.Query
			cfg := baseConfig()
			cfg.StatusBudget = budget
			cfg.Checker = statusquery.CheckerFunc(func(ctx context.Context, q statusquery.Query) statusquery.Answer {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, q)
				a := tt.answers[min(calls, len(tt.answers)-1)]
				calls++
				return a
			})
			runUntilIdle(t, c, cfg)

			j := jobByKey(t, c, k)
			if j.State != tt.state {
				t.Fatalf("state = %s, want %s\n%s", j.State, tt.state, describe(j))
			}
			if tt.reasonHas != "" && !strings.Contains(j.Reason, tt.reasonHas) {
				t.Errorf("reason = %q, want it to contain %q", j.Reason, tt.reasonHas)
			}
			posts := st.postsFor(k)
			if got := len(posts); got != tt.postsWant {
				t.Errorf("POSTs received = %d, want %d", got, tt.postsWant)
			}
			checkSameRequest(t, posts, k, body)
			if got := st.Creates(k); got != tt.createsWant {
				t.Errorf("creates at the target = %d, want %d", got, tt.createsWant)
			}
			mu.Lock()
			n := calls
			qs := slices.Clone(seen)
			mu.Unlock()
			if tt.maxQueries {
				if n < 1 || n > tt.queries {
					t.Errorf("checker calls = %d, want 1..%d", n, tt.queries)
				}
			} else if n != tt.queries {
				t.Errorf("checker calls = %d, want %d", n, tt.queries)
			}
			if got := len(eventsOf(j, store.EventStatusQuery)); got != n {
				t.Errorf("status query events = %d, checker calls = %d; want them equal", got, n)
			}
			for i, q := range qs {
				if q.Key != k || q.JobID != job.ID || q.JobMethod != http.MethodPost {
					t.Errorf("query %d = key %q job %q method %q, want %q %q POST", i+1, q.Key, q.JobID, q.JobMethod, k, job.ID)
				}
			}
			if tt.source != "" && (j.Result == nil || j.Result.Source != tt.source) {
				t.Errorf("result = %+v, want source %q", j.Result, tt.source)
			}
			if tt.resultBody != nil && (j.Result == nil || !bytes.Equal(j.Result.Body, tt.resultBody)) {
				t.Errorf("result = %+v, want body %q", j.Result, tt.resultBody)
			}
		})
	}
}

// Resolving a parked job records who decided and why.
func TestResolveRecordsActorAndNote(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{LoseResponse: 1})
	const k = "resolve-1"
	enqueue(t, c, ft.PaymentsURL(), []byte(`{"amount":1}`), api.EnqueueOptions{Key: k, AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateNeedsAttention {
		t.Fatalf("state = %s, want needs_attention\n%s", j.State, describe(j))
	}
	v, err := c.Resolve(t.Context(), j.ID, store.StateSucceeded, "alice", "checked dashboard")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if v.State != store.StateSucceeded {
		t.Errorf("returned state = %s, want succeeded", v.State)
	}
	j = jobByKey(t, c, k)
	if j.State != store.StateSucceeded {
		t.Fatalf("stored state = %s, want succeeded", j.State)
	}
	m := j.LastEvent(store.EventManual)
	if m == nil {
		t.Fatalf("no manual event in history\n%s", describe(j))
	}
	if m.Actor != "alice" || m.Note != "checked dashboard" || m.From != store.StateNeedsAttention || m.To != store.StateSucceeded {
		t.Errorf("manual event = actor %q note %q %s→%s, want alice %q needs_attention→succeeded", m.Actor, m.Note, m.From, m.To, "checked dashboard")
	}
	if !strings.Contains(j.Reason, "alice") || !strings.Contains(j.Reason, "checked dashboard") {
		t.Errorf("reason = %q, want it to name alice and the note", j.Reason)
	}
	// A resolved job is not resolved again.
	if _, err := c.Resolve(t.Context(), j.ID, store.StateFailed, "bob", "second thoughts"); err == nil {
		t.Errorf("second Resolve succeeded, want a refusal")
	}
	if got, want := ft.totalPosts(), 1; got != want {
		t.Errorf("POSTs received = %d, want %d", got, want)
	}
}

// A status query that finds nothing when no attempt is left ends the job
// failed: the effect did not happen, and idemrun says so.
func TestNotFoundWithoutAttemptsLeftFails(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	st := newScriptTarget(t, []postStep{dropNoCreate}, nil)
	const k = "not-found-last-1"
	enqueue(t, c, st.PaymentsURL(), []byte(`{"amount":2}`), api.EnqueueOptions{Key: k, StatusURL: st.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 1})

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateFailed {
		t.Fatalf("state = %s, want failed\n%s", j.State, describe(j))
	}
	if got := outcomesOf(j); !slices.Equal(got, []string{string(statusquery.NotFound)}) {
		t.Errorf("status query outcomes = %q, want [%q]", got, statusquery.NotFound)
	}
	if got, want := len(st.postsFor(k)), 1; got != want {
		t.Errorf("POSTs received = %d, want %d", got, want)
	}
	if got := st.Creates(k); got != 0 {
		t.Errorf("creates at the target = %d, want 0", got)
	}
	if j.MayHaveEffect {
		t.Errorf("may_have_effect set on a job the target has no record of")
	}
}

// A runner stopped while an attempt is in flight records it as unknown
// before Run returns; the next runner settles it by a status query, not by
// a replay.
func TestShutdownMidAttemptIsUnknown(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{SlowCommit: 1, SlowCommitDelay: 30 * time.Second})
	const k = "shutdown-1"
	body := []byte(`{"amount":31}`)
	enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 10 * time.Second, MaxAttempts: 3})

	cfg := baseConfig()
	cfg.UntilIdle = false
	cfg.ShutdownGrace = 20 * time.Millisecond
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := ft.fake.WaitInFlight(ctx, k, 1); err != nil {
		t.Fatalf("waiting for the attempt to reach the target: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	j := jobByKey(t, c, k)
	if j.State != store.StateUnknown {
		t.Fatalf("state after shutdown = %s, want unknown\n%s", j.State, describe(j))
	}
	if got, want := eventsOf(j, store.EventAttempt)[0].Class, string(runner.ClassUnknown); got != want {
		t.Errorf("attempt 1 class = %q, want %q", got, want)
	}

	if n := ft.fake.CommitInFlight(); n != 1 {
		t.Fatalf("CommitInFlight = %d, want 1", n)
	}
	runUntilIdle(t, c, baseConfig())

	j = jobByKey(t, c, k)
	if j.State != store.StateSucceeded {
		t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
	}
	if got, want := len(ft.postsFor(k)), 1; got != want {
		t.Errorf("POSTs received = %d, want %d", got, want)
	}
	if got, want := ft.fake.Creates(k), 1; got != want {
		t.Errorf("creates at the target = %d, want %d", got, want)
	}
}

// A crash after the attempt record was written leaves the job running;
// recovery makes it unknown and a status query decides: found means no
// resend, not found means a replay with the same bytes.
func TestRecoveredAttemptIsQueriedFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		sentFirst bool // the attempt reached the target before the crash
		postsWant int
		outcome   statusquery.Outcome
	}{
		{"sent before the crash", true, 1, statusquery.FoundSucceeded},
		{"never sent", false, 1, statusquery.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := openClient(t)
			ft := newFakeTarget(t, faketarget.Config{})
			const k = "recover-1"
			body := []byte(`{"amount":8}`)
			job := enqueue(t, c, ft.PaymentsURL(), body, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})

			// What a runner does before its first byte leaves: claim, with
			// the attempt event durable. Then it "crashes".
			now := time.Now()
			claims, err := c.Store().ClaimDue(t.Context(), store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1, Prepare: func(j *store.Job) {
				j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
			}})
			if err != nil || len(claims) != 1 {
				t.Fatalf("ClaimDue = %d claims, %v; want 1", len(claims), err)
			}
			if tt.sentFirst {
				sent, err := runner.BuildRequest(t.Context(), claims[0].Job)
				if err != nil {
					t.Fatalf("BuildRequest: %v", err)
				}
				resp, err := http.DefaultClient.Do(sent)
				if err != nil {
					t.Fatalf("sending the attempt by hand: %v", err)
				}
				resp.Body.Close()
			}

			runUntilIdle(t, c, baseConfig())

			j := jobByKey(t, c, k)
			if j.State != store.StateSucceeded {
				t.Fatalf("state = %s, want succeeded\n%s", j.State, describe(j))
			}
			if len(eventsOf(j, store.EventRecovery)) != 1 {
				t.Errorf("recovery events = %d, want 1\n%s", len(eventsOf(j, store.EventRecovery)), describe(j))
			}
			if got := outcomesOf(j); len(got) == 0 || got[0] != string(tt.outcome) {
				t.Errorf("status query outcomes = %q, want the first %q", got, tt.outcome)
			}
			posts := ft.postsFor(k)
			if len(posts) != tt.postsWant {
				t.Errorf("POSTs received = %d, want %d", len(posts), tt.postsWant)
			}
			checkSameRequest(t, posts, k, body)
			if got, want := ft.fake.Creates(k), 1; got != want {
				t.Errorf("creates at the target = %d, want %d", got, want)
			}
			if j.ID != job.ID {
				t.Errorf("job id changed: %s, want %s", j.ID, job.ID)
			}
		})
	}
}

// The key ".." is a valid idempotency key, but it cannot be placed in a
// status URL path ({key} in the path would be normalized away), so this
// job's unknown outcome can never be checked. That must surface at once:
// either Enqueue refuses the combination, or the runner parks the job after
// its first futile query. It must not spend the whole status budget asking
// a question it cannot ask.
func TestUnexpandableKeyIsRefusedOrParked(t *testing.T) {
	t.Parallel()
	c := openClient(t)
	ft := newFakeTarget(t, faketarget.Config{}, faketarget.Faults{LoseResponse: 1})
	const k = ".."
	req := api.Request{Method: http.MethodPost, URL: ft.PaymentsURL(), Body: []byte(`{"amount":6}`)}
	_, err := c.Enqueue(t.Context(), req, api.EnqueueOptions{Key: k, StatusURL: ft.StatusTemplate(), AttemptTimeout: 2 * time.Second, MaxAttempts: 3})
	if err != nil {
		if !errors.Is(err, api.ErrInvalid) {
			t.Fatalf("Enqueue error = %v, want one matching api.ErrInvalid", err)
		}
		if got := ft.totalPosts(); got != 0 {
			t.Errorf("POSTs received after a refused enqueue = %d, want 0", got)
		}
		return
	}

	runUntilIdle(t, c, baseConfig())

	j := jobByKey(t, c, k)
	if j.State != store.StateNeedsAttention {
		t.Fatalf("state = %s, want needs_attention\n%s", j.State, describe(j))
	}
	if j.StatusQueries > 1 {
		t.Errorf("status queries = %d, want at most 1: the status URL cannot be built for this key, asking again cannot help (reason %q)", j.StatusQueries, j.Reason)
	}
	if !strings.Contains(j.Reason, "status URL template") {
		t.Errorf("reason = %q, want it to name the status URL template", j.Reason)
	}
	if got, want := ft.totalPosts(), 1; got != want {
		t.Errorf("POSTs received = %d, want %d", got, want)
	}
}
