package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

func (m *Main) list(ctx context.Context, args []string) error {
	fs, db := m.flags("list", "[--state STATE]... [--host H] [--since T] [--until T] [--key-prefix P] [--id-prefix P] [--oldest | --sort next_run|updated] [--limit N] [--cursor C] [--json | --json-page]")
	ff := addFilterFlags(fs, "only jobs in this state (repeatable)")
	sort := fs.String("sort", "", "next_run: earliest next run first (with --state pending and/or unknown); updated: latest update first (with other --state values); within each --state in turn")
	limit := fs.Int("limit", 50, fmt.Sprintf("page size (1-%d)", store.MaxListLimit))
	cursor := fs.String("cursor", "", "continue after a previous page (printed as next); with --state, a job rescheduled between pages within its state may be missed or shown twice (without --state every job is on exactly one page)")
	oldest := fs.Bool("oldest", false, "oldest first within each --state (earliest next run / least recently updated)")
	asJSON := fs.Bool("json", false, "print a JSON array of jobs (the next page's command goes to stderr)")
	pageJSON := fs.Bool("json-page", false, `print the page as JSON: {"jobs": [...], "next": CURSOR}, next absent on the last page`)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("list: unexpected argument %q", fs.Arg(0))
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	ss := f.States
	if *sort != "" && *sort != string(api.ListSortNextRun) && *sort != string(api.ListSortUpdated) {
		return &api.InvalidError{Field: "--sort", Value: fmt.Sprintf("%q", *sort), Accepted: api.SortAccepted}
	}
	if *limit < 1 || *limit > store.MaxListLimit {
		return &api.InvalidError{Field: "limit", Value: fmt.Sprint(*limit), Accepted: fmt.Sprintf("an integer from 1 to %d", store.MaxListLimit)}
	}
	if *oldest && len(ss) == 0 {
		return &api.InvalidError{Field: "oldest", Value: "true", Accepted: "--oldest together with at least one --state"}
	}
	if *asJSON && *pageJSON {
		return usagef("list: give --json or --json-page, not both")
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	svc, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	f.Limit, f.Cursor, f.Oldest, f.Sort = *limit, *cursor, *oldest, api.ListSort(*sort)
	page, err := svc.List(ctx, f)
	if err != nil {
		return flagged(err)
	}
	if page.Jobs == nil {
		page.Jobs = []*api.Job{}
	}
	if *pageJSON {
		return m.printJSON(page)
	}
	more := ""
	if page.Next != "" {
		more = nextPageCommand(dbt, *db != "", f, *asJSON, page.Next)
	}
	if *asJSON {
		if more != "" {
			fmt.Fprintf(m.Stderr, "next: %s\n", more)
		}
		return m.printJSON(page.Jobs)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tATTEMPTS\tLAST\tMETHOD\tURL\tUPDATED\tKEY")
	for _, j := range page.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, listState(j), j.MaxAttempts-j.AttemptsLeft, j.MaxAttempts, lastOf(j), j.Method, trunc(j.URL, 48), ago(j.UpdatedAt), trunc(j.Key, 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more != "" {
		fmt.Fprintf(m.Stdout, "more: %s\n", more)
	}
	return nil
}

// lastOf is list's LAST column: the last attempt's status or class, or
// "found" when a status query settled the job (its last attempt's
// "unknown" is what the query answered, not how the job ended).
func lastOf(j *api.Job) string {
	switch {
	case j.SettledBy == "status_query" && j.State.Terminal():
		return "found"
	case j.LastStatus != 0:
		return fmt.Sprint(j.LastStatus)
	case j.LastClass != "":
		return j.LastClass
	}
	return "-"
}

// nextPageCommand is the list command that prints the page after this one:
// the same filters, order and page size, and the cursor.
func nextPageCommand(db dbTarget, dbGiven bool, f api.ListFilter, asJSON bool, next string) string {
	parts := []string{"idemrun list"}
	if dbGiven {
		parts = append(parts, "--db "+shellQuote(api.Redacted(db.path)))
	}
	if db.schema != "" {
		parts = append(parts, "--schema "+shellQuote(db.schema))
	}
	for _, s := range f.States {
		parts = append(parts, "--state "+string(s))
	}
	for _, fl := range []struct{ name, v string }{{"host", f.Host}, {"key-prefix", f.KeyPrefix}, {"id-prefix", f.IDPrefix}, {"sort", string(f.Sort)}} {
		if fl.v != "" {
			parts = append(parts, "--"+fl.name+" "+shellQuote(fl.v))
		}
	}
	// Times as they were read: a relative --since would move between pages.
	if !f.Since.IsZero() {
		parts = append(parts, "--since "+f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "--until "+f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.Oldest {
		parts = append(parts, "--oldest")
	}
	if f.Limit != 50 {
		parts = append(parts, fmt.Sprintf("--limit %d", f.Limit))
	}
	if asJSON {
		parts = append(parts, "--json")
	}
	return strings.Join(append(parts, "--cursor "+next), " ")
}

func (m *Main) show(ctx context.Context, args []string) error {
	fs, db := m.flags("show", "ID|KEY [--json]")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("show: give exactly one job id or key")
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	svc, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	j, err := svc.Get(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(j)
	}
	return renderJob(m.Stdout, j)
}

// stateOf is a job's state as list and show print it: a running job
// whose runner's lease expired says so, as nobody is working it.
func stateOf(j *api.Job) string {
	if j.RunnerGone() {
		return "running, runner gone"
	}
	return string(j.State)
}

// listState is list's STATE column: stateOf, and for a running job the
// runner working it (the first characters of its id; show prints it
// whole), so a stuck job can be traced to its node.
func listState(j *api.Job) string {
	if j.State != store.StateRunning || j.Owner == "" {
		return stateOf(j)
	}
	owner := trunc(j.Owner, 9)
	switch j.Lease {
	case api.LeaseAlive:
		return "running on " + owner + ", lease alive"
	case api.LeaseExpired:
		return stateOf(j) + " (" + owner + ")"
	}
	return "running on " + owner
}

func renderJob(w io.Writer, j *api.Job) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	p("id", "%s", j.ID)
	p("key", "%s", j.Key)
	p("state", "%s", stateOf(j))
	if j.Owner != "" {
		switch {
		case j.RunnerGone():
			p("runner", "%s, gone (its lease expired): the next runner to start takes the attempt it started as an unknown outcome", j.Owner)
		case j.Lease == api.LeaseAlive:
			p("runner", "%s (lease alive)", j.Owner)
		default:
			p("runner", "%s", j.Owner)
		}
	}
	if j.Reason != "" {
		p("reason", "%s", printable(j.Reason))
	}
	if h := resolveHint(j); h != "" {
		p("resolve with", "%s", h)
	}
	p("request", "%s %s (%d body bytes)", printable(j.Method), printable(j.URL), j.BodySize)
	for _, h := range j.Headers {
		p("  header", "%s: %s", printable(h.Name), printable(h.Value))
	}
	if counted := j.MaxAttempts - j.AttemptsLeft; counted != j.Attempts {
		// 409 answers and attempts before a manual retry are not counted.
		p("attempts", "%d of %d counted, %d started (409 answers and attempts before a retry are not counted; timeout %s each)", counted, j.MaxAttempts, j.Attempts, time.Duration(j.AttemptTimeout))
	} else {
		p("attempts", "%d of %d (timeout %s each)", j.Attempts, j.MaxAttempts, time.Duration(j.AttemptTimeout))
	}
	if j.StatusURL != "" {
		p("status url", "%s (%s)", printable(j.StatusURL), plural(j.StatusQueries, "query", "queries"))
	}
	if j.KeyTTL != 0 {
		p("key ttl", "%s", time.Duration(j.KeyTTL))
	}
	p("created", "%s", j.CreatedAt.Format(time.RFC3339Nano))
	p("updated", "%s", j.UpdatedAt.Format(time.RFC3339Nano))
	if j.State == store.StatePending || j.State == store.StateUnknown {
		// Only these are run again by themselves.
		p("next run", "%s", j.NextRunAt.Format(time.RFC3339Nano))
	}
	p("deadline", "%s", j.Deadline.Format(time.RFC3339Nano))
	if j.LastError != "" {
		p("last error", "%s", printable(j.LastError))
	}
	if j.Result != nil {
		body := j.Result.Body
		if body == "" && len(j.Result.BodyBase64) > 0 {
			body = fmt.Sprintf("(%d binary bytes)", len(j.Result.BodyBase64))
		}
		tr := ""
		if j.Result.Truncated {
			tr = " (truncated)"
		}
		p("result", "%d from %s%s: %s", j.Result.HTTPStatus, j.Result.Source, tr, trunc(strings.TrimSpace(body), 200))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.History) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nhistory:")
	if j.HistoryDropped > 0 {
		fmt.Fprintf(w, "  (%d events dropped after the first ones: attempts and status queries first, a person's actions last)\n", j.HistoryDropped)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  WHEN\tWHAT\tTOOK\tRESULT\tDETAIL\tNEXT")
	for _, s := range api.Timeline(j.History) {
		took, next := "-", ""
		switch {
		case s.EndUnknown:
			took = "end unknown"
		case s.Ended:
			took = s.Took.Round(time.Microsecond).String()
		}
		if s.Delay > 0 || s.DelayReason != "" {
			next = fmt.Sprintf("wait %s (%s)", s.Delay.Round(time.Millisecond), s.DelayReason)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", s.At.Format("15:04:05.000"), s.What, took, printable(s.Result), trunc(s.Detail, 100), printable(next))
	}
	return tw.Flush()
}

func (m *Main) stats(ctx context.Context, args []string) error {
	fs, db := m.flags("stats", "[--json]")
	asJSON := fs.Bool("json", false, "print an object with every state and its count")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("stats: unexpected argument %q", fs.Arg(0))
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	svc, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	st, err := svc.Stats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(st)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	var total int64
	for _, s := range sortedStates(st) {
		fmt.Fprintf(tw, "%s\t%d\t\n", s, st[s])
		total += st[s]
	}
	fmt.Fprintf(tw, "total\t%d\t\n", total)
	return tw.Flush()
}

func (m *Main) cancel(ctx context.Context, args []string) error {
	return m.steer(ctx, api.BulkCancel, args, func(svc *api.Client, id, note string) (*api.Job, error) {
		return svc.Cancel(ctx, id, m.actor(), note)
	})
}

func (m *Main) retry(ctx context.Context, args []string) error {
	return m.steer(ctx, api.BulkRetry, args, func(svc *api.Client, id, note string) (*api.Job, error) {
		return svc.Retry(ctx, id, m.actor(), note)
	})
}

func (m *Main) steer(ctx context.Context, a api.BulkAction, args []string, fn func(svc *api.Client, id, note string) (*api.Job, error)) error {
	name := string(a)
	fs, db := m.flags(name, fmt.Sprintf("ID [--note TEXT] [--json]\n       idemrun %s --all --state %s [--host H] [--since T] [--until T] [--key-prefix P] [--id-prefix P] --note TEXT [--dry-run] [--json]", name, api.BulkState(a)))
	note := fs.String("note", "", "why (recorded in the history; required with --all)")
	asJSON := fs.Bool("json", false, "print the job as JSON (with --all: the result, {\"matched\", \"changed\", \"unchanged\", \"unchanged_count\"})")
	bf := addBulkFlags(fs, a)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if err := bf.check(fs, name); err != nil {
		return err
	}
	if *bf.all {
		return m.bulk(ctx, fs, *db, a, bf, "", *note, *asJSON)
	}
	if fs.NArg() != 1 {
		return usagef("%s: give exactly one job id, or --all with filters", name)
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	svc, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	j, err := fn(svc, fs.Arg(0), *note)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(j)
	}
	fmt.Fprintf(m.Stdout, "%s: %s is now %s\n", name, j.ID, j.State)
	return nil
}

func (m *Main) resolve(ctx context.Context, args []string) error {
	fs, db := m.flags("resolve", "ID --as succeeded|failed --note TEXT [--json]\n       idemrun resolve --all --state needs_attention --as succeeded|failed [--host H] [--since T] [--until T] [--key-prefix P] [--id-prefix P] --note TEXT [--dry-run] [--json]")
	as := fs.String("as", "", "succeeded or failed")
	note := fs.String("note", "", "what you checked (required; recorded in the history of each job)")
	asJSON := fs.Bool("json", false, "print the job as JSON (with --all: the result, {\"matched\", \"changed\", \"unchanged\", \"unchanged_count\"})")
	bf := addBulkFlags(fs, api.BulkResolve)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if err := bf.check(fs, "resolve"); err != nil {
		return err
	}
	if !*bf.all && fs.NArg() != 1 {
		return usagef("resolve: give exactly one job id, or --all with filters")
	}
	if *as != "succeeded" && *as != "failed" {
		return &api.InvalidError{Field: "as", Value: fmt.Sprintf("%q", *as), Accepted: "succeeded or failed"}
	}
	if *bf.all {
		return m.bulk(ctx, fs, *db, api.BulkResolve, bf, *as, *note, *asJSON)
	}
	if strings.TrimSpace(*note) == "" {
		return &api.InvalidError{Field: "note", Value: `""`, Accepted: "a non-empty note saying what you checked"}
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	svc, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	j, err := svc.Resolve(ctx, fs.Arg(0), store.State(*as), m.actor(), *note)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(j)
	}
	fmt.Fprintf(m.Stdout, "resolve: %s is now %s\n", j.ID, j.State)
	return nil
}
