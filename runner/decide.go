package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// attempt sends one claimed attempt and writes its outcome.
func (r *Runner) attempt(ctx context.Context, s *slot, c store.Claim) {
	j := c.Job
	now := r.cfg.Now()
	left := j.Deadline.Sub(now)
	if left <= 0 {
		r.write(s, c, func(j *store.Job) error {
			closeAttempt(j, now, ClassNoEffect, 0, "not sent: deadline passed before the attempt")
			r.stop(j, now, "deadline passed before attempt could be sent")
			return nil
		})
		r.cfg.Logger.Info("deadline passed; not sent", "job", j.ID, "attempt", j.Attempts)
		return
	}
	if j.MayHaveEffect && !r.canQuery(j) && !replaySafe(j) {
		// This send is a replay that relies on the target deduplicating the
		// key (a replay-safe request relies on nothing). It was scheduled inside the key TTL window, but a restart or
		// a backlog may have delayed it past the window: check again now.
		if window := r.keyTTLWindow(j); j.KeyTTL > 0 && !now.Before(window) {
			r.write(s, c, func(j *store.Job) error {
				closeAttempt(j, now, ClassNoEffect, 0, "not sent: the key TTL window closed before the replay could be sent")
				r.park(j, now, fmt.Sprintf("an earlier attempt may have taken effect and the key TTL window (until %s) closed before the replay could be sent; replaying now could duplicate",
					window.UTC().Format(time.RFC3339)), "")
				return nil
			})
			r.cfg.Logger.Warn("replay not sent: key TTL window closed", "job", j.ID, "attempt", j.Attempts)
			return
		}
	}
	var checkErr error // a CheckSend failure that is not a refusal of the target
	if r.cfg.CheckSend != nil {
		// The hook sees a copy: the claimed job is what the outcome is
		// written over, and what is sent is the stored request (P2).
		if err := r.cfg.CheckSend(ctx, j.Clone()); err != nil && (!errors.Is(err, ErrNotAllowed) || ctx.Err() != nil) {
			// A resolver that failed, or the runner stopping: nothing was
			// sent, so the attempt had no effect and is classified so.
			checkErr = fmt.Errorf("not sent: %w", err)
		} else if err != nil {
			msg := r.errText(j, err)
			r.write(s, c, func(j *store.Job) error {
				closeAttempt(j, now, ClassPermanent, 0, "not sent: "+msg)
				j.LastError, j.LastClass = msg, string(ClassPermanent)
				r.stop(j, now, "refused before sending: "+msg)
				return nil
			})
			r.cfg.Logger.Warn("send refused", "job", j.ID, "attempt", j.Attempts, "class", ClassPermanent)
			return
		}
	}
	timeout := min(j.AttemptTimeout, left)
	if timeout <= 0 {
		timeout = left
	}
	var res sendResult
	timedOut := false
	if checkErr != nil {
		res = sendResult{err: checkErr, start: now, end: r.cfg.Now()}
	} else {
		actx, cancel := context.WithTimeout(ctx, timeout)
		res = send(actx, r.cfg.Doer, j, r.cfg.BodyLimit, r.cfg.Now)
		timedOut = actx.Err() != nil
		cancel()
	}

	rules := ClassifyRules{NoEffectStatuses: j.NoEffectStatuses, ReplaySafe: replaySafe(j)}
	var v Verdict
	if res.status != 0 {
		v = ClassifyResponse(res.status, rules)
	} else {
		shutting := ctx.Err() != nil
		v = ClassifyError(res.err, res.progress, shutting, rules)
		if errors.Is(res.err, context.DeadlineExceeded) && timedOut {
			v.Reason = fmt.Sprintf("%s (attempt timeout %s)", v.Reason, timeout)
		}
	}
	v.Reason = boundText(v.Reason)
	r.sent(s)
	pushBack := r.observeSend(ctx, s.host, res, checkErr != nil)
	errText := ""
	if res.err != nil {
		errText = r.errText(j, res.err)
	}
	end := res.end
	var delayNote string
	r.write(s, c, func(j *store.Job) error {
		ev := lastOpenAttempt(j)
		if ev != nil {
			ev.End = end
			ev.Class = string(v.Class)
			ev.HTTPStatus = res.status
			ev.Error = firstNonEmpty(errText, v.Reason)
			ev.Truncated = res.truncated
			if res.header != nil {
				ev.RetryAfter = strings.Join(res.header.Values("Retry-After"), ", ")
				ev.Replayed = res.header.Get("Idempotent-Replayed")
			}
		}
		if v.Class == ClassNoEffect && ctx.Err() != nil && !res.progress.WroteHeaders {
			// Stopped before anything left: this attempt does not count
			// against the budget, so restarts (a rolling deploy) do not
			// fail jobs that were never sent.
			j.AttemptBase++
		}
		if pushBack && j.AttemptBase-j.RetryBase < j.MaxAttempts {
			// The host asked every sender to wait: this send does not
			// count against the budget, up to MaxAttempts free sends
			// since the last manual retry (shared with 409s).
			j.AttemptBase++
		}
		j.LastClass = string(v.Class)
		j.LastStatus = res.status
		j.LastError = joinReason(v.Reason, errText)
		delayNote = r.decideAfterAttempt(j, v, res, end)
		return nil
	})
	// One line per attempt is debug: at thousands of jobs per second it
	// would be most of the runner's output and a good part of its CPU. The
	// check first spares building the arguments when debug is off.
	if r.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		// A failure without an answer (a timeout, a reset) is said in
		// words: a status of 0 alone tells nothing.
		attrs := []any{"job", j.ID, "key", j.Key, "attempt", j.Attempts, "class", v.Class}
		if res.status != 0 {
			attrs = append(attrs, "status", res.status)
		}
		if res.status == 0 || errText != "" {
			attrs = append(attrs, "error", firstNonEmpty(joinReason(v.Reason, errText), "no answer"))
		}
		r.cfg.Logger.DebugContext(ctx, "attempt finished", append(attrs, "next", delayNote)...)
	}
}

// joinReason is a verdict's reason and the error text behind it, as a
// job's last error records them.
func joinReason(reason, errText string) string {
	if errText == "" {
		return reason
	}
	return reason + ": " + errText
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// maxStoredText bounds each error, reason and detail text a job records:
// a server can make net/http quote a 10 MiB response head into an error,
// and a job keeps up to MaxHistory events (P5).
const maxStoredText = 2 << 10

// errText is err's text as a job records it: redacted, then bounded. The
// text is cut to a generous size before redaction only to bound its cost.
func (r *Runner) errText(j *store.Job, err error) string {
	text := err.Error()
	if len(text) > 64*maxStoredText {
		text = text[:64*maxStoredText]
	}
	return boundText(r.cfg.Redact(j, text))
}

// boundText cuts s to maxStoredText bytes on a character boundary, saying
// how much was cut.
func boundText(s string) string {
	if len(s) <= maxStoredText {
		return s
	}
	cut := maxStoredText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes cut)", len(s)-cut)
}

func replaySafe(j *store.Job) bool {
	return safeMethod(j.Request.Method) || j.ReplaySafe
}

// safeMethod reports the methods that have no effect by definition (RFC
// 9110 §9.2.1): an attempt of them that may have arrived changed nothing.
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

func closeAttempt(j *store.Job, now time.Time, class Class, status int, msg string) {
	if ev := lastOpenAttempt(j); ev != nil {
		ev.End, ev.Class, ev.HTTPStatus, ev.Error = now, string(class), status, msg
	}
}

// decideAfterAttempt sets the job's next state from an attempt's verdict. It
// returns a short note for the log.
func (r *Runner) decideAfterAttempt(j *store.Job, v Verdict, res sendResult, now time.Time) string {
	switch v.Class {
	case ClassSucceeded:
		j.Result = &store.Result{HTTPStatus: res.status, Body: res.body, Truncated: res.truncated, Source: "attempt"}
		j.MayHaveEffect = false
		j.LastError = ""
		r.end(j, now, store.StateSucceeded, "")
		return "succeeded"
	case ClassKeyMismatch:
		j.Result = &store.Result{HTTPStatus: res.status, Body: res.body, Truncated: res.truncated, Source: "attempt"}
		r.park(j, now, fmt.Sprintf("key mismatch: the target answered %d, saying key %q was already used with a different payload", res.status, j.Key),
			"find out which request the target holds")
		return "needs_attention"
	case ClassPermanent:
		j.Result = &store.Result{HTTPStatus: res.status, Body: res.body, Truncated: res.truncated, Source: "attempt"}
		if res.status == http.StatusSeeOther && !replaySafe(j) {
			// 303 See Other points to the result of a request the server
			// processed (RFC 9110 §15.4.4): not followed, and not claimed
			// as "did not happen" either.
			j.MayHaveEffect = true
			r.park(j, now, fmt.Sprintf("permanent: %s; a 303 answers a request the server processed, so it may have taken effect", j.LastError), "")
			return string(j.State)
		}
		r.stop(j, now, "permanent: "+j.LastError)
		return string(j.State)
	case ClassNoEffect:
		if v.ReplayOfUnknown && !safeMethod(j.Request.Method) {
			// Repeating is harmless, but this attempt may have taken
			// effect: the job can no longer be canceled, nor end failed.
			j.MayHaveEffect = true
		}
		return r.retryLater(j, v, res, now)
	case ClassInProgress:
		// 409: a request with this key is in progress at the target. It
		// proves the target tracks the key; this send does not count
		// against the budget.
		// A run of 409s is bounded: beyond MaxAttempts free sends since
		// the last manual retry they count like any attempt. (Counted by
		// AttemptBase, not from the history, which is trimmed.)
		if j.AttemptBase-j.RetryBase < j.MaxAttempts {
			j.AttemptBase++
		}
		j.MayHaveEffect = true
		if r.canQuery(j) {
			return r.queryLater(j, now, retryAfterOf(v, res, now), "the target reports this key in progress (409); checking status")
		}
		if j.KeyTTL > 0 {
			return r.replayInTTL(j, now, retryAfterOf(v, res, now))
		}
		return r.retryLater(j, v, res, now)
	default: // ClassUnknown
		j.MayHaveEffect = true
		return r.afterUnknown(j, now, retryAfterOf(v, res, now))
	}
}

// retryLater schedules the next attempt after a no-effect outcome, or stops
// the job when the budget, the deadline or the server's wait forbid one.
func (r *Runner) retryLater(j *store.Job, v Verdict, res sendResult, now time.Time) string {
	if j.AttemptsLeft() <= 0 {
		r.stop(j, now, fmt.Sprintf("%d attempts used; last error: %s", j.MaxAttempts, j.LastError))
		return string(j.State)
	}
	delay := r.backoff(r.cfg.Backoff, j.Attempts-j.RetryBase)
	reason := "backoff"
	if v.RetryAfterHonored && res.header != nil {
		if ra, ok := ParseRetryAfter(res.header.Values("Retry-After"), now); ok {
			if ra > r.cfg.RetryAfterCap {
				r.stop(j, now, fmt.Sprintf("target asked to wait %s (Retry-After), over the cap %s; last error: %s", ra, r.cfg.RetryAfterCap, j.LastError))
				return string(j.State)
			}
			if ra >= delay {
				delay, reason = ra, "retry-after"
			}
		}
	}
	next := now.Add(delay)
	if !next.Before(j.Deadline) {
		r.stop(j, now, fmt.Sprintf("next attempt in %s (%s) would pass the deadline %s; last error: %s",
			delay.Round(time.Millisecond), reason, j.Deadline.UTC().Format(time.RFC3339), j.LastError))
		return string(j.State)
	}
	schedule(j, now, store.StatePending, store.EventAttempt, delay, reason)
	return fmt.Sprintf("retry in %s (%s)", delay.Round(time.Millisecond), reason)
}

// schedule puts the job in state s, due after delay, and records the delay
// and why on the last event of kind ev (the attempt or query that led here).
func schedule(j *store.Job, now time.Time, s store.State, ev store.EventKind, delay time.Duration, why string) {
	if e := j.LastEvent(ev); e != nil {
		e.Delay, e.DelayReason = delay, why
	}
	j.State = s
	j.NextRunAt = now.Add(delay)
	j.UpdatedAt = now
}

// stop ends a job whose automatic work is over: failed when nothing it sent
// may have taken effect, needs_attention when something may have.
func (r *Runner) stop(j *store.Job, now time.Time, why string) {
	if j.MayHaveEffect {
		r.park(j, now, why+"; an earlier attempt may have taken effect and it could not be confirmed", "")
		return
	}
	r.end(j, now, store.StateFailed, why)
}

// park ends automatic work on a job that may have taken effect: it goes to
// needs_attention with a reason that says what happened, what a person
// must do (action; default "check with the target") and that they then
// resolve the job (store.Jobs.Resolve). How they resolve it is the
// caller's to say: the CLI adds its command where it shows the job.
func (r *Runner) park(j *store.Job, now time.Time, why, action string) {
	if action == "" {
		action = "check with the target"
	}
	r.end(j, now, store.StateNeedsAttention, fmt.Sprintf("%s; a person must %s, then resolve the job as succeeded or failed", why, action))
}

func (r *Runner) end(j *store.Job, now time.Time, s store.State, reason string) {
	j.State = s
	j.Reason = reason
	j.UpdatedAt = now
	j.NextRunAt = now
	j.UnknownSince = time.Time{}
}

func (r *Runner) canQuery(j *store.Job) bool {
	return r.custom || j.StatusURL != ""
}

// toUnknown parks the job for a status query after delay.
func (r *Runner) toUnknown(j *store.Job, now time.Time, delay time.Duration, why string) string {
	if j.UnknownSince.IsZero() {
		j.UnknownSince = now
		j.StatusBase = j.StatusQueries
	}
	j.State = store.StateUnknown
	j.NextRunAt = now.Add(delay)
	j.UpdatedAt = now
	if why != "" {
		j.Reason = why
	}
	return fmt.Sprintf("status query in %s", delay.Round(time.Millisecond))
}

// retryAfterOf is the server's Retry-After when the verdict honors it, or 0.
func retryAfterOf(v Verdict, res sendResult, now time.Time) time.Duration {
	if !v.RetryAfterHonored || res.header == nil {
		return 0
	}
	ra, ok := ParseRetryAfter(res.header.Values("Retry-After"), now)
	if !ok {
		return 0
	}
	return ra
}

// afterUnknown decides what an unknown outcome leads to: a status query, a
// replay inside the key TTL, or a person. floor is the server's
// Retry-After, if any.
func (r *Runner) afterUnknown(j *store.Job, now time.Time, floor time.Duration) string {
	if r.canQuery(j) {
		return r.queryLater(j, now, floor, "outcome unknown; checking the target's status endpoint before any replay")
	}
	return r.replayInTTL(j, now, floor)
}

// queryLater schedules the first status query no earlier than the server's
// Retry-After (floor), or stops now when that wait is over the cap or
// past the status grace after the deadline (ARCHITECTURE.md §4).
func (r *Runner) queryLater(j *store.Job, now time.Time, floor time.Duration, why string) string {
	delay := max(r.cfg.QuietPeriod, floor)
	switch {
	case floor > r.cfg.RetryAfterCap:
		r.stop(j, now, fmt.Sprintf("outcome unknown and the target asked to wait %s (Retry-After), over the cap %s; last error: %s", floor, r.cfg.RetryAfterCap, j.LastError))
		return string(j.State)
	case now.Add(delay).After(j.Deadline.Add(r.cfg.StatusGrace)):
		r.stop(j, now, fmt.Sprintf("outcome unknown and the first status query (in %s) would come after status queries stop (%s after the deadline); last error: %s",
			delay.Round(time.Millisecond), r.cfg.StatusGrace, j.LastError))
		return string(j.State)
	}
	return r.toUnknown(j, now, delay, why)
}

// keyTTLWindow is when replays that rely on the target's key deduplication
// must stop: first send + key TTL − margin.
func (r *Runner) keyTTLWindow(j *store.Job) time.Time {
	return j.FirstSentAt.Add(j.KeyTTL - r.cfg.KeyTTLMargin)
}

// replayInTTL replays an unknown attempt with the same key while the target
// still deduplicates it (first send + key TTL − margin), never earlier than
// floor (the server's Retry-After), or parks the job for a person.
func (r *Runner) replayInTTL(j *store.Job, now time.Time, floor time.Duration) string {
	if j.KeyTTL <= 0 {
		r.park(j, now, fmt.Sprintf("response lost after sending (%s); the target has no status endpoint and no key TTL, so idemrun cannot tell whether it took effect and will not resend",
			firstNonEmpty(j.LastError, "unknown outcome")), "")
		return "needs_attention"
	}
	window := r.keyTTLWindow(j)
	delay := max(r.backoff(r.cfg.Backoff, j.Attempts-j.RetryBase), floor)
	switch {
	case floor > r.cfg.RetryAfterCap:
		r.stop(j, now, fmt.Sprintf("outcome unknown and the target asked to wait %s (Retry-After), over the cap %s", floor, r.cfg.RetryAfterCap))
		return string(j.State)
	case j.AttemptsLeft() <= 0:
		r.stop(j, now, fmt.Sprintf("outcome unknown and %d attempts used; last error: %s", j.MaxAttempts, j.LastError))
		return string(j.State)
	case !now.Add(delay).Before(window):
		r.stop(j, now, fmt.Sprintf("outcome unknown and the key TTL window (until %s) is over; replaying now could duplicate", window.UTC().Format(time.RFC3339)))
		return string(j.State)
	case !now.Add(delay).Before(j.Deadline):
		r.stop(j, now, "outcome unknown and the deadline allows no replay; last error: "+j.LastError)
		return string(j.State)
	}
	schedule(j, now, store.StatePending, store.EventAttempt, delay, "replay inside key TTL")
	return fmt.Sprintf("replay in %s inside key TTL", delay.Round(time.Millisecond))
}

// resolveUnknown runs one status query for a claimed unknown job and acts on
// the answer.
func (r *Runner) resolveUnknown(ctx context.Context, s *slot, c store.Claim) {
	j := c.Job
	now := r.cfg.Now()
	if !r.canQuery(j) {
		r.write(s, c, func(j *store.Job) error {
			if replaySafe(j) {
				// Safe to repeat, also after a crash. A declared
				// replay-safe request that may have arrived may still
				// have taken effect: it stays so (no cancel, no failed).
				j.MayHaveEffect = !safeMethod(j.Request.Method)
				j.UnknownSince = time.Time{}
				r.retryLater(j, Verdict{Class: ClassNoEffect}, sendResult{}, now)
				return nil
			}
			r.replayInTTL(j, now, 0)
			return nil
		})
		return
	}
	if over := r.statusBudgetOver(j, now); over != "" {
		r.write(s, c, func(j *store.Job) error {
			r.park(j, now, fmt.Sprintf("%s; the outcome of attempt %d is still unknown", over, j.Attempts), "")
			return nil
		})
		r.cfg.Logger.Warn("status budget exhausted", "job", j.ID, "query", j.StatusQueries)
		return
	}
	var ans statusquery.Answer
	err := r.checkQuery(ctx, j)
	if err != nil {
		ans = statusquery.Answer{Outcome: statusquery.NoAnswer, Detail: "not sent: " + r.errText(j, err), Err: err}
	} else {
		q := statusquery.Query{JobID: j.ID, Key: j.Key, JobMethod: j.Request.Method, JobURL: j.Request.URL,
			JobHeader: j.Request.HTTPHeader(), Template: j.StatusURL}
		qctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
		ans = r.checker.Check(qctx, q)
		cancel()
	}
	r.sent(s)
	r.observeQuery(ctx, s.host, ans, err != nil)
	if !ans.Outcome.Valid() {
		ans = statusquery.Answer{Outcome: statusquery.NoAnswer, Detail: fmt.Sprintf("checker returned invalid outcome %q", ans.Outcome)}
	}
	end := r.cfg.Now()
	errText := ""
	if ans.Err != nil {
		errText = r.errText(j, ans.Err)
	}
	ans.Detail = boundText(ans.Detail)
	var note string
	r.write(s, c, func(j *store.Job) error {
		j.AddEvent(store.Event{Kind: store.EventStatusQuery, N: j.StatusQueries, Start: now, End: end,
			HTTPStatus: ans.HTTPStatus, Outcome: string(ans.Outcome), Detail: ans.Detail, Error: errText, Truncated: ans.Truncated})
		note = r.decideAfterQuery(j, ans, end)
		return nil
	})
	if r.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		attrs := []any{"job", j.ID, "key", j.Key, "query", j.StatusQueries, "outcome", ans.Outcome}
		if ans.HTTPStatus != 0 {
			attrs = append(attrs, "status", ans.HTTPStatus)
		}
		if t := strings.TrimSpace(ans.Detail + " " + errText); t != "" {
			attrs = append(attrs, "detail", t)
		}
		r.cfg.Logger.DebugContext(ctx, "status query finished", append(attrs, "next", note)...)
	}
}

// checkQuery runs Config.CheckQuery, if set.
func (r *Runner) checkQuery(ctx context.Context, j *store.Job) error {
	if r.cfg.CheckQuery == nil {
		return nil
	}
	return r.cfg.CheckQuery(ctx, j.Clone()) // a copy, as CheckSend gets
}

func (r *Runner) statusBudgetOver(j *store.Job, now time.Time) string {
	if used := j.StatusQueries - j.StatusBase; used > r.cfg.StatusBudget {
		return fmt.Sprintf("status budget exhausted (%d queries)", r.cfg.StatusBudget)
	}
	if limit := j.Deadline.Add(r.cfg.StatusGrace); now.After(limit) {
		return fmt.Sprintf("status budget exhausted (queries stop %s after the deadline)", r.cfg.StatusGrace)
	}
	return ""
}

func (r *Runner) decideAfterQuery(j *store.Job, ans statusquery.Answer, now time.Time) string {
	result := func() *store.Result {
		return &store.Result{HTTPStatus: ans.HTTPStatus, Body: ans.Body, Truncated: ans.Truncated, Source: "status_query"}
	}
	switch ans.Outcome {
	case statusquery.FoundSucceeded:
		j.Result = result()
		j.MayHaveEffect = false
		j.LastError = ""
		r.end(j, now, store.StateSucceeded, "status query found the operation: "+ans.Detail)
		return "succeeded"
	case statusquery.FoundFailed:
		j.Result = result()
		j.MayHaveEffect = false
		r.end(j, now, store.StateFailed, "status query found the operation failed: "+ans.Detail)
		return "failed"
	case statusquery.Duplicate:
		j.Result = result()
		r.park(j, now, fmt.Sprintf("duplicate: the status endpoint found more than one operation for key %q (%s)", j.Key, ans.Detail), "reconcile at the target")
		return "needs_attention"
	case statusquery.NotFound:
		// The target has no trace of any attempt: none took effect. After a
		// 409 a replay is still safe (the 409 shows the target deduplicates
		// the key), but the 409 itself said something with this key was in
		// progress, so running out of limits then is not "did not happen".
		if at := r.settleAt(j); now.Before(at) {
			// Asked inside the settle window: the create may not show
			// yet. Asked again with the status backoff, and at the
			// latest when the window is over.
			return r.queryWithin(j, ans, now, at.Sub(now), "settle window")
		}
		after409 := j.LastClass == string(ClassInProgress)
		j.MayHaveEffect = after409
		j.UnknownSince = time.Time{}
		if after409 && (j.AttemptsLeft() <= 0 || !now.Before(j.Deadline)) {
			r.stop(j, now, "the status endpoint finds nothing, but the target answered 409 (a request with this key in progress) and no attempts or time are left")
			return string(j.State)
		}
		if j.AttemptsLeft() <= 0 {
			r.end(j, now, store.StateFailed, fmt.Sprintf("the target has no record of the request and %d attempts are used; last error: %s", j.MaxAttempts, j.LastError))
			return "failed"
		}
		if !now.Before(j.Deadline) {
			r.end(j, now, store.StateFailed, "the target has no record of the request and the deadline passed; last error: "+j.LastError)
			return "failed"
		}
		j.State = store.StatePending
		j.NextRunAt = now
		j.UpdatedAt = now
		j.Reason = "status query: not found; replaying with the same key and bytes"
		return "replay now"
	default: // InProgress, NoAnswer
		if errors.Is(ans.Err, statusquery.ErrInvalidValue) || errors.Is(ans.Err, statusquery.ErrInvalidTemplate) {
			r.park(j, now, fmt.Sprintf("the status URL cannot be built for this job (%v), so its unknown outcome cannot be checked", ans.Err), "")
			return "needs_attention"
		}
		return r.queryAgain(j, ans, now)
	}
}

// queryAgain schedules the next status query with backoff, or parks the job
// when the status budget is spent.
func (r *Runner) queryAgain(j *store.Job, ans statusquery.Answer, now time.Time) string {
	return r.queryWithin(j, ans, now, -1, "status backoff")
}

// queryWithin schedules the next status query with backoff, no later than
// limit when limit ≥ 0, or parks the job when the status budget is spent.
func (r *Runner) queryWithin(j *store.Job, ans statusquery.Answer, now time.Time, limit time.Duration, why string) string {
	n := j.StatusQueries - j.StatusBase
	delay := r.backoff(r.cfg.StatusBackoff, n)
	if limit >= 0 && delay > limit {
		delay = limit
	}
	if n >= r.cfg.StatusBudget {
		r.park(j, now, fmt.Sprintf("status budget exhausted (%d queries, last answer: %s %s); the outcome of attempt %d is still unknown",
			n, ans.Outcome, ans.Detail, j.Attempts), "")
		return "needs_attention"
	}
	schedule(j, now, store.StateUnknown, store.EventStatusQuery, delay, why)
	return fmt.Sprintf("query again in %s (%s)", delay.Round(time.Millisecond), why)
}
