package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/store"
)

// BulkAction is a manual action applied to every job a filter matches.
type BulkAction string

// The bulk actions: those of Retry, Cancel and Resolve.
const (
	BulkRetry   BulkAction = "retry"
	BulkCancel  BulkAction = "cancel"
	BulkResolve BulkAction = "resolve"
)

// Limits of a bulk action.
const (
	// MaxBulkJobs bounds the jobs one bulk action's filter may match.
	MaxBulkJobs = store.MaxBulkJobs
	// BulkBatch is how many jobs one transaction of a bulk action changes.
	BulkBatch = store.MaxBulkBatch
	// MaxBulkUnchanged bounds the unchanged jobs a BulkResult lists.
	MaxBulkUnchanged = 100
)

// BulkRequest is a bulk action: Action applied to every job Filter
// matches.
type BulkRequest struct {
	// Filter selects the jobs. States are required (the state the action
	// applies to: failed for retry, pending for cancel, needs_attention
	// for resolve); Cursor, Limit, Oldest and Sort are ignored.
	Filter ListFilter
	Action BulkAction
	// As is the state a resolve ends the jobs in: succeeded or failed.
	As State
	// Actor defaults to Actor(); Note, required, is recorded on each job.
	Actor, Note string
	// DryRun counts the jobs the filter matches and changes nothing.
	DryRun bool
}

// BulkResult is what a bulk action did.
type BulkResult struct {
	// Matched is how many jobs the filter matched when the action ran.
	Matched int `json:"matched"`
	// Changed is how many of them the action changed.
	Changed int `json:"changed"`
	// Unchanged lists up to 100 (MaxBulkUnchanged) of the others, each
	// with its id and why it was left as it was.
	Unchanged []BulkUnchanged `json:"unchanged,omitempty"`
	// UnchangedCount is how many matched jobs the action left as they
	// were.
	UnchangedCount int `json:"unchanged_count"`
}

// BulkUnchanged is a job a bulk action left as it was, and why.
type BulkUnchanged struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// bulkStates is the state each action applies to.
var bulkStates = map[BulkAction]State{BulkRetry: store.StateFailed, BulkCancel: store.StatePending, BulkResolve: store.StateNeedsAttention}

// BulkState is the state a bulk action applies to (failed for retry,
// pending for cancel, needs_attention for resolve), "" for an unknown
// action.
func BulkState(a BulkAction) State { return bulkStates[a] }

// Bulk applies a manual action to every job a filter matches: it takes
// the ids the filter matches at the call (at most MaxBulkJobs; a filter
// that matches more is refused, to be narrowed), then changes them in
// transactions of BulkBatch jobs, each as Retry, Cancel or Resolve would,
// with the same rules. A job enqueued after the call is not touched; a
// job that left the state meanwhile is left as it is and listed in
// Unchanged with its reason. With DryRun it only counts. An error after
// some batches were written comes with the result so far.
func (c *Client) Bulk(ctx context.Context, r BulkRequest) (BulkResult, error) {
	if err := checkBulk(r); err != nil {
		return BulkResult{}, err
	}
	if c.rem != nil {
		r.Actor = actorOr(r.Actor)
		if !r.DryRun {
			if err := c.writable(); err != nil {
				return BulkResult{}, err
			}
		}
		return c.rem.bulk(ctx, bulkWire(r))
	}
	f := r.Filter
	f.Cursor, f.Limit, f.Oldest, f.Sort = "", 0, false, ListSortDefault
	sf, err := c.storeFilter(f)
	if err != nil {
		return BulkResult{}, err
	}
	ids, more, err := c.st.MatchIDs(sf, MaxBulkJobs)
	if err != nil {
		return BulkResult{}, err
	}
	if more {
		return BulkResult{}, invalid("filter", describeFilter(f), fmt.Sprintf("a filter that matches at most %d jobs (this one matches more): narrow it by host, time, key or id prefix", MaxBulkJobs))
	}
	res := BulkResult{Matched: len(ids)}
	if r.DryRun || len(ids) == 0 {
		return res, nil
	}
	now := c.opts.Now().UTC()
	var act store.TransitionFunc
	switch r.Action {
	case BulkRetry:
		act = store.RetryJob(now, actorOr(r.Actor), r.Note)
	case BulkCancel:
		act = store.CancelJob(now, actorOr(r.Actor), r.Note)
	default:
		if act, err = store.ResolveJob(r.As, now, actorOr(r.Actor), r.Note); err != nil {
			return BulkResult{}, err
		}
	}
	want := bulkStates[r.Action]
	fn := func(j *store.Job) error {
		if j.State != want {
			return &store.TransitionError{JobID: j.ID, From: j.State, Why: "state is now " + string(j.State)}
		}
		return act(j)
	}
	for start := 0; start < len(ids); start += BulkBatch {
		batch := ids[start:min(start+BulkBatch, len(ids))]
		errs, err := c.st.ManualMany(ctx, batch, fn)
		if err != nil {
			return res, fmt.Errorf("bulk %s stopped after %d of %d jobs: %w", r.Action, start, len(ids), err)
		}
		for i, e := range errs {
			if e == nil {
				res.Changed++
				c.changes.wake(batch[i])
				continue
			}
			res.UnchangedCount++
			if len(res.Unchanged) < MaxBulkUnchanged {
				res.Unchanged = append(res.Unchanged, BulkUnchanged{ID: batch[i], Reason: bulkReason(e)})
			}
		}
	}
	if r.Action == BulkRetry && res.Changed > 0 && c.notify != nil {
		c.notify()
	}
	return res, nil
}

// checkBulk checks what a bulk request asks before any job is read.
func checkBulk(r BulkRequest) error {
	want, ok := bulkStates[r.Action]
	if !ok {
		return invalid("action", string(r.Action), "retry, cancel or resolve")
	}
	if len(r.Filter.States) == 0 {
		return invalid("state", "", fmt.Sprintf("the state %s applies to (%s)", r.Action, want))
	}
	for _, s := range r.Filter.States {
		if _, err := store.ParseState(string(s)); err != nil {
			return invalid("state", string(s), StatesAccepted)
		}
		if s != want {
			return invalid("state", string(s), fmt.Sprintf("%s (%s applies to %s jobs only)", want, r.Action, want))
		}
	}
	switch {
	case r.Action == BulkResolve && r.As != store.StateSucceeded && r.As != store.StateFailed:
		return invalid("as", string(r.As), "succeeded or failed")
	case r.Action != BulkResolve && r.As != "":
		return invalid("as", string(r.As), "nothing: only resolve takes the state it resolves as")
	case strings.TrimSpace(r.Note) == "" || len(r.Note) > MaxNoteLen:
		return invalid("note", r.Note, fmt.Sprintf("a non-empty explanation of at most %d bytes, recorded on each job", MaxNoteLen))
	}
	return checkSteer(r.Actor, r.Note)
}

// bulkReason says in a few words why a bulk action left a job unchanged.
func bulkReason(err error) string {
	var te *store.TransitionError
	switch {
	case errors.As(err, &te) && te.Why != "":
		return te.Why
	case errors.As(err, &te):
		return fmt.Sprintf("it cannot go from %s to %s", te.From, te.To)
	case errors.Is(err, store.ErrNotFound):
		return "the job no longer exists"
	}
	return err.Error()
}

// describeFilter writes a bulk filter for a message.
func describeFilter(f ListFilter) string {
	var parts []string
	for _, s := range f.States {
		parts = append(parts, "state "+string(s))
	}
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	add("host", f.Host)
	if !f.Since.IsZero() {
		add("since", f.Since.Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		add("until", f.Until.Format(time.RFC3339Nano))
	}
	add("key prefix", f.KeyPrefix)
	add("id prefix", f.IDPrefix)
	return strings.Join(parts, ", ")
}

// bulkWire is r as the admin API takes it.
func bulkWire(r BulkRequest) adminwire.Bulk {
	w := adminwire.Bulk{
		Host: r.Filter.Host, KeyPrefix: r.Filter.KeyPrefix, IDPrefix: r.Filter.IDPrefix,
		Action: string(r.Action), As: string(r.As), Actor: r.Actor, Note: r.Note, DryRun: r.DryRun,
	}
	for _, s := range r.Filter.States {
		w.States = append(w.States, string(s))
	}
	if !r.Filter.Since.IsZero() {
		w.Since = r.Filter.Since.Format(time.RFC3339Nano)
	}
	if !r.Filter.Until.IsZero() {
		w.Until = r.Filter.Until.Format(time.RFC3339Nano)
	}
	return w
}

// BulkFromWire reads a bulk request as the admin API takes it; a bad
// state or time is an *InvalidError naming its field.
func BulkFromWire(w adminwire.Bulk) (BulkRequest, error) {
	r := BulkRequest{
		Filter: ListFilter{Host: w.Host, KeyPrefix: w.KeyPrefix, IDPrefix: w.IDPrefix},
		Action: BulkAction(w.Action), As: State(w.As), Actor: w.Actor, Note: w.Note, DryRun: w.DryRun,
	}
	for _, s := range w.States {
		st, err := store.ParseState(s)
		if err != nil {
			return BulkRequest{}, invalid("states", s, StatesAccepted)
		}
		r.Filter.States = append(r.Filter.States, st)
	}
	for _, t := range []struct {
		name, v string
		to      *time.Time
	}{{"since", w.Since, &r.Filter.Since}, {"until", w.Until, &r.Filter.Until}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			return BulkRequest{}, invalid(t.name, t.v, "a time in RFC 3339 (2026-01-02T15:04:05Z)")
		}
		*t.to = v
	}
	return r, nil
}
