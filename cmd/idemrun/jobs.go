package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/store"
)

func (m *Main) enqueue(ctx context.Context, args []string) error {
	fs, db := m.flags("enqueue", "--url URL [--method POST] [-H 'Name: value']... [--data STRING... | --data-file FILE|-] [--key KEY] [--status-url TEMPLATE] [--key-ttl D] [--max-attempts N] [--deadline D] [--attempt-timeout D] [--key-format token|structured] [--replay-safe] [--no-effect-status N,...] [--run-at TIME|D] [--allow-host HOST]... [--json]\n       idemrun enqueue --from FILE|- [--json]   (JSON lines, one job each)")
	url := fs.String("url", "", "target URL (http or https)")
	method := fs.String("method", "POST", "HTTP method")
	headers := fs.StringArrayP("header", "H", nil, "request header 'Name: value' (repeatable), like curl -H")
	data := fs.StringArray("data", nil, "request body; @FILE reads it from a file; repeated, the parts are joined with &, like curl's -d")
	dataFile := fs.String("data-file", "", "read the request body from FILE, or - for standard input")
	key := fs.String("key", "", "idempotency key (default: a new random UUIDv4)")
	keyFormat := fs.String("key-format", "token", "Idempotency-Key header form: token or structured (IETF sf-string)")
	statusURL := fs.String("status-url", "", "status endpoint template with {key} and/or {id}")
	keyTTL := fs.Duration("key-ttl", 0, "how long the target deduplicates by key (enables replays without a status URL)")
	maxAttempts := fs.Int("max-attempts", api.DefaultMaxAttempts, "attempt limit (1-100)")
	deadline := fs.Duration("deadline", api.DefaultDeadline, "stop automatic work this long after enqueue")
	attemptTimeout := fs.Duration("attempt-timeout", api.DefaultAttemptTO, "timeout of one attempt")
	replaySafe := fs.Bool("replay-safe", false, "the request is safe to repeat (like GET)")
	runAt := fs.String("run-at", "", "first attempt at TIME (RFC 3339, e.g. 2026-12-24T09:00:00Z) or after a duration from now (e.g. 10m); default now")
	noEffect := fs.IntSlice("no-effect-status", nil, "statuses the target guarantees were not processed (e.g. 503)")
	from := fs.String("from", "", "enqueue many jobs from JSON lines in FILE, or - for standard input")
	allow := fs.StringArray("allow-host", nil, "refuse targets not on this allowlist (repeatable; exact or *.example.com)")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("enqueue: unexpected argument %q", fs.Arg(0))
	}
	if *from != "" {
		// Each line carries its own job; a single-job flag beside --from
		// would be dropped, so it is refused.
		for _, name := range []string{"url", "method", "header", "data", "data-file", "key", "key-format", "status-url",
			"key-ttl", "max-attempts", "deadline", "attempt-timeout", "replay-safe", "no-effect-status", "run-at"} {
			if fs.Changed(name) {
				return usagef("enqueue: --%s cannot be combined with --from: each JSON line gives its own job's fields (%s)", name, fromFieldList)
			}
		}
		dbt, err := m.db(fs, *db)
		if err != nil {
			return err
		}
		return m.enqueueFrom(ctx, dbt, *from, *allow, *asJSON)
	}
	if *url == "" {
		return usagef("enqueue: --url is required (an absolute http:// or https:// URL)")
	}
	if fs.Changed("method") && *method == "" {
		return &api.InvalidError{Field: "method", Value: `""`, Accepted: "an HTTP method such as POST or PUT; omit --method for POST"}
	}
	req := api.Request{Method: *method, URL: *url}
	for _, h := range *headers {
		f, err := api.ParseHeaderLine(h)
		if err != nil {
			return err
		}
		req.Header = append(req.Header, f)
	}
	switch {
	case fs.Changed("data") && fs.Changed("data-file"):
		return usagef("enqueue: give --data or --data-file, not both")
	case fs.Changed("data-file"):
		b, err := m.readBody(*dataFile, "data-file")
		if err != nil {
			return err
		}
		req.Body = b
	case fs.Changed("data"):
		// curl joins repeated -d values with '&'.
		var body []byte
		for i, d := range *data {
			if i > 0 {
				body = append(body, '&')
			}
			if strings.HasPrefix(d, "@") {
				b, err := m.readBody(d[1:], "data")
				if err != nil {
					return err
				}
				d = string(b)
			}
			body = append(body, d...)
		}
		req.Body = body // its size is checked with the rest of the request
	}
	o := api.EnqueueOptions{Key: *key, StatusURL: *statusURL, KeyTTL: *keyTTL, MaxAttempts: *maxAttempts,
		Deadline: *deadline, AttemptTimeout: *attemptTimeout, ReplaySafe: *replaySafe, NoEffectStatuses: *noEffect}
	if fs.Changed("key") && *key == "" {
		return &api.InvalidError{Field: "key", Value: `""`, Accepted: api.KeyAccepted + "; omit --key for a generated one"}
	}
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"deadline", *deadline}, {"attempt-timeout", *attemptTimeout}, {"key-ttl", *keyTTL}} {
		if fs.Changed(c.name) && c.d <= 0 {
			return &api.InvalidError{Field: c.name, Value: c.d.String(), Accepted: "a positive duration such as 30s, 5m, 2h"}
		}
	}
	if fs.Changed("max-attempts") && *maxAttempts < 1 {
		return &api.InvalidError{Field: "max-attempts", Value: fmt.Sprint(*maxAttempts), Accepted: "an integer from 1 to 100"}
	}
	kf, err := idemkey.ParseFormat(*keyFormat)
	if err != nil {
		return &api.InvalidError{Field: "key-format", Value: fmt.Sprintf("%q", *keyFormat), Accepted: "token or structured"}
	}
	o.KeyFormat = kf
	if fs.Changed("run-at") {
		if o.RunAt, err = api.ParseRunAt(*runAt, time.Now()); err != nil {
			return &api.InvalidError{Field: "run-at", Value: fmt.Sprintf("%q", *runAt), Accepted: api.RunAtAccepted}
		}
	}
	// Validate (allowlist included) before the file is touched, so bad
	// input writes nothing and the runner's socket is as good as the file.
	// Its errors hide the names the file records as sensitive too.
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	if _, err := api.ValidateFor(dbt.path, req, o, *allow); err != nil {
		return err
	}
	if o.Key == "" {
		o.Key = idemkey.New() // here, so a second try after no answer is the same job
	}
	svc, err := m.openService(dbt, true)
	if err != nil {
		return err
	}
	defer func() {
		if svc != nil {
			svc.Close()
		}
	}()
	res, err := sendAgainIfUnknown(m, dbt, &svc, func(s *api.Client) (api.EnqueueResult, error) { return s.Enqueue(ctx, req, o) })
	if outcomeUnknown(err) {
		return fmt.Errorf("%w; the job's key is %s: enqueue the same request again with --key %s", err, o.Key, o.Key)
	}
	if err != nil {
		return err
	}
	res.Job.Existing = res.Existing
	if *asJSON {
		return m.printJSON(res.Job)
	}
	verb := "enqueued"
	if res.Existing {
		verb = "existing (same request already enqueued under this key)"
	}
	fmt.Fprintf(m.Stdout, "%s %s\n", verb, res.Job.ID)
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  key\t%s\n  state\t%s\n  request\t%s %s\n", res.Job.Key, res.Job.State, res.Job.Method, res.Job.URL)
	return tw.Flush()
}

// readBody reads a request body from the file name, or standard input for
// "-"; field is the flag that named it, for errors.
func (m *Main) readBody(name, field string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = m.Stdin
	} else {
		f, err := openInput(name, field, "a readable file, or - for standard input")
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, api.MaxBodyLen+1))
	if err != nil {
		return nil, &api.InvalidError{Field: field, Value: fmt.Sprintf("%q", name), Accepted: "a readable file, or - for standard input (" + err.Error() + ")"}
	}
	if len(b) > api.MaxBodyLen {
		return nil, &api.InvalidError{Field: "body", Value: "(over 1 MiB)", Accepted: "at most 1048576 bytes"}
	}
	return b, nil
}

// openInput opens the file name that the flag field gave for reading; a
// file that cannot be opened, or a directory, is invalid input naming the
// flag and what it accepts.
func openInput(name, field, accepted string) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, &api.InvalidError{Field: field, Value: fmt.Sprintf("%q", name), Accepted: accepted + " (" + err.Error() + ")"}
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, &api.InvalidError{Field: field, Value: fmt.Sprintf("%q", name), Accepted: accepted + " (it is a directory)"}
	}
	return f, nil
}

// fromFieldList names the fields of a --from line.
var fromFieldList = strings.Join(api.EnqueueFields(), ", ")

// atLine names the --from line in a refusal of that line: a refusal of
// the line as a whole is the line's, one of a field is the line's field.
func atLine(line int, err error) error {
	if ie, ok := errors.AsType[*api.InvalidError](err); ok {
		if ie.Field == api.SpecWhole {
			return &api.InvalidError{Field: fmt.Sprintf("--from line %d", line), Value: ie.Value, Accepted: strings.Replace(ie.Accepted, "one JSON object", "one JSON object per line", 1)}
		}
		if slices.Contains(api.EnqueueFields(), ie.Field) {
			return &api.InvalidError{Field: fmt.Sprintf("--from line %d: %s", line, ie.Field), Value: ie.Value, Accepted: ie.Accepted}
		}
	}
	return fmt.Errorf("--from line %d: %w", line, err)
}

func (m *Main) enqueueFrom(ctx context.Context, dbt dbTarget, from string, allow []string, asJSON bool) error {
	var r io.Reader = m.Stdin
	if from != "-" {
		f, err := openInput(from, "from", "a readable JSON-lines file or -")
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	now := time.Now()
	var items []api.ManyItem
	var lines []int // the file line of each item
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 2*api.MaxBodyLen+64<<10)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		spec, err := api.DecodeEnqueue([]byte(text))
		if err != nil {
			return atLine(line, err)
		}
		req, o, err := spec.Parts(now)
		if err != nil {
			return atLine(line, err)
		}
		if _, err := api.ValidateFor(dbt.path, req, o, allow); err != nil {
			return fmt.Errorf("--from line %d: %w", line, err)
		}
		items = append(items, api.ManyItem{Request: req, Options: o})
		lines = append(lines, line)
		if len(items) > 100000 {
			return &api.InvalidError{Field: "from", Value: "(over 100000 lines)", Accepted: "at most 100000 jobs per call"}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &api.InvalidError{Field: "from", Value: fmt.Sprintf("line %d", line+1), Accepted: "lines of at most 2 MiB"}
		}
		return &api.InvalidError{Field: "from", Value: fmt.Sprintf("%q, line %d", from, line+1), Accepted: "a readable JSON-lines file or - (" + err.Error() + ")"}
	}
	// The same limit whether a runner holds the file (the batch then goes
	// through its admin API in one request) or not.
	if err := api.CheckBatch(items); err != nil {
		if ie, ok := errors.AsType[*api.InvalidError](err); ok {
			return &api.InvalidError{Field: "from", Value: ie.Value, Accepted: ie.Accepted}
		}
		return err
	}
	for i := range items {
		if items[i].Options.Key == "" {
			// Here, so a second try after no answer is the same batch.
			items[i].Options.Key = idemkey.New()
		}
	}
	svc, err := m.openService(dbt, true)
	if err != nil {
		return err
	}
	defer func() {
		if svc != nil {
			svc.Close()
		}
	}()
	res, err := sendAgainIfUnknown(m, dbt, &svc, func(s *api.Client) ([]api.ManyResult, error) { return s.EnqueueMany(ctx, items) })
	if outcomeUnknown(err) {
		// Name every key: lines that had none got theirs here, and only
		// these keys make a re-run safe.
		for i, it := range items {
			fmt.Fprintf(m.Stderr, "idemrun: --from line %d: key %s\n", lines[i], it.Options.Key)
		}
		return fmt.Errorf("%w; the key of each line is listed above: enqueue the lines again with these keys", err)
	}
	if err != nil {
		return err
	}
	failed, existing := 0, 0
	out := []any{} // --json prints [] for no jobs, never null
	for i, r := range res {
		if r.Existing {
			existing++
		}
		if r.Err != nil {
			failed++
			fmt.Fprintf(m.Stderr, "idemrun: --from line %d: %v\n", lines[i], r.Err)
			out = append(out, map[string]any{"error": r.Err.Error(), "line": lines[i]})
			continue
		}
		r.Job.Existing = r.Existing
		out = append(out, r.Job)
	}
	if asJSON {
		if err := m.printJSON(out); err != nil {
			return err
		}
	} else {
		// Jobs found under their keys with the same request count apart,
		// as a single enqueue says "existing".
		fmt.Fprintf(m.Stdout, "enqueued %d jobs (%d already stored under their keys, %d refused)\n", len(res)-failed-existing, existing, failed)
	}
	if failed > 0 {
		return &silentError{code: exitFailure}
	}
	return nil
}

func (m *Main) list(ctx context.Context, args []string) error {
	fs, db := m.flags("list", "[--state STATE]... [--oldest] [--limit N] [--cursor C] [--json | --json-page]")
	states := fs.StringArray("state", nil, "only jobs in this state (repeatable)")
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
	ss, err := stateNames(*states)
	if err != nil {
		return err
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
	page, err := svc.List(ctx, api.ListFilter{States: ss, Limit: *limit, Cursor: *cursor, Oldest: *oldest})
	if err != nil {
		return err
	}
	if page.Jobs == nil {
		page.Jobs = []*api.Job{}
	}
	if *pageJSON {
		return m.printJSON(page)
	}
	more := ""
	if page.Next != "" {
		more = nextPageCommand(dbt, *db != "", ss, *limit, *oldest, *asJSON, page.Next)
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
		last := "-"
		if j.LastStatus != 0 {
			last = fmt.Sprint(j.LastStatus)
		} else if j.LastClass != "" {
			last = j.LastClass
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, stateOf(j), j.MaxAttempts-j.AttemptsLeft, j.MaxAttempts, last, j.Method, trunc(j.URL, 48), ago(j.UpdatedAt), trunc(j.Key, 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more != "" {
		fmt.Fprintf(m.Stdout, "more: %s\n", more)
	}
	return nil
}

// nextPageCommand is the list command that prints the page after this one:
// the same filters, order and page size, and the cursor.
func nextPageCommand(db dbTarget, dbGiven bool, ss []store.State, limit int, oldest, asJSON bool, next string) string {
	parts := []string{"idemrun list"}
	if dbGiven {
		parts = append(parts, "--db "+shellQuote(api.Redacted(db.path)))
	}
	if db.schema != "" {
		parts = append(parts, "--schema "+shellQuote(db.schema))
	}
	for _, s := range ss {
		parts = append(parts, "--state "+string(s))
	}
	if oldest {
		parts = append(parts, "--oldest")
	}
	if limit != 50 {
		parts = append(parts, fmt.Sprintf("--limit %d", limit))
	}
	if asJSON {
		parts = append(parts, "--json")
	}
	return strings.Join(append(parts, "--cursor "+next), " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// trunc is free text (a target's answer, an error, a note) made fit for a
// terminal line: control characters escaped, then cut to about n bytes at
// a character boundary.
func trunc(s string, n int) string {
	s = printable(s)
	if len(s) <= n {
		return s
	}
	cut := n - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// printable escapes what a terminal would act on instead of showing:
// C0 and C1 control characters (escape sequences that clear the screen,
// retitle the window or move the cursor back over a line), DEL, the
// bidirectional overrides that reorder text, and invalid UTF-8. A target's
// answer or anyone's note must not be able to make a failed job look
// succeeded on screen.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if !showable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case showable(r):
			b.WriteString(s[i : i+n])
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

func showable(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return false // invalid UTF-8 decodes as this; a real U+FFFD is escaped too
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return false
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return false // bidirectional controls
	}
	return true
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "in " + (-d).Round(time.Second).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String() + " ago"
	default:
		return d.Round(time.Second).String() + " ago"
	}
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
		p("status url", "%s (%d queries)", printable(j.StatusURL), j.StatusQueries)
	}
	if j.KeyTTL != 0 {
		p("key ttl", "%s", time.Duration(j.KeyTTL))
	}
	p("created", "%s", j.CreatedAt.Format(time.RFC3339Nano))
	p("updated", "%s", j.UpdatedAt.Format(time.RFC3339Nano))
	p("next run", "%s", j.NextRunAt.Format(time.RFC3339Nano))
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
	for _, e := range j.History {
		what, result, detail, next := string(e.Kind), "", "", ""
		took := "-"
		if !e.End.IsZero() {
			took = e.End.Sub(e.Start).Round(time.Microsecond).String()
		}
		switch e.Kind {
		case store.EventAttempt:
			what = fmt.Sprintf("attempt %d", e.N)
			result = e.Class
			if e.End.IsZero() {
				result = "in flight"
			}
			if e.HTTPStatus != 0 {
				result += fmt.Sprintf(" %d", e.HTTPStatus)
			}
			detail = e.Error
			if e.RetryAfter != "" {
				detail += " [Retry-After: " + e.RetryAfter + "]"
			}
			if e.Replayed != "" {
				detail += " [Idempotent-Replayed: " + e.Replayed + "]"
			}
		case store.EventStatusQuery:
			what = fmt.Sprintf("status query %d", e.N)
			result = e.Outcome
			if e.HTTPStatus != 0 {
				result += fmt.Sprintf(" %d", e.HTTPStatus)
			}
			detail = strings.TrimSpace(e.Detail + " " + e.Error)
		case store.EventManual:
			what = "manual"
			result = fmt.Sprintf("%s → %s", e.From, e.To)
			detail = fmt.Sprintf("by %s: %s", e.Actor, e.Note)
		case store.EventRecovery:
			result = fmt.Sprintf("%s → %s", e.From, e.To)
			detail = e.Detail
		}
		if e.Delay > 0 || e.DelayReason != "" {
			next = fmt.Sprintf("wait %s (%s)", e.Delay.Round(time.Millisecond), e.DelayReason)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", e.Start.Format("15:04:05.000"), what, took, printable(result), trunc(detail, 100), printable(next))
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
	return m.steer(ctx, "cancel", args, func(svc *api.Client, id, note string) (*api.Job, error) {
		return svc.Cancel(ctx, id, api.Actor(), note)
	})
}

func (m *Main) retry(ctx context.Context, args []string) error {
	return m.steer(ctx, "retry", args, func(svc *api.Client, id, note string) (*api.Job, error) {
		return svc.Retry(ctx, id, api.Actor(), note)
	})
}

func (m *Main) steer(ctx context.Context, name string, args []string, fn func(svc *api.Client, id, note string) (*api.Job, error)) error {
	fs, db := m.flags(name, "ID [--note TEXT] [--json]")
	note := fs.String("note", "", "why (recorded in the history)")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("%s: give exactly one job id", name)
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
	fs, db := m.flags("resolve", "ID --as succeeded|failed --note TEXT [--json]")
	as := fs.String("as", "", "succeeded or failed")
	note := fs.String("note", "", "what you checked (required; recorded in the history)")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("resolve: give exactly one job id")
	}
	if *as != "succeeded" && *as != "failed" {
		return &api.InvalidError{Field: "as", Value: fmt.Sprintf("%q", *as), Accepted: "succeeded or failed"}
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
	j, err := svc.Resolve(ctx, fs.Arg(0), store.State(*as), api.Actor(), *note)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(j)
	}
	fmt.Fprintf(m.Stdout, "resolve: %s is now %s\n", j.ID, j.State)
	return nil
}
