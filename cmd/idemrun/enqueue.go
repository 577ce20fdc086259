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

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
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
	// Examples past a flag's own limit would mislead: each has its own.
	for _, c := range []struct {
		name     string
		d, limit time.Duration
		examples string
	}{{"deadline", *deadline, api.MaxDeadline, "30s, 5m, 2h"}, {"attempt-timeout", *attemptTimeout, api.MaxAttemptTimeout, "500ms, 30s, 5m"},
		{"key-ttl", *keyTTL, api.MaxKeyTTL, "30s, 5m, 2h"}} {
		if fs.Changed(c.name) && (c.d <= 0 || c.d > c.limit) {
			return &api.InvalidError{Field: c.name, Value: shortDuration(c.d), Accepted: fmt.Sprintf("a positive duration up to %s, such as %s", shortDuration(c.limit), c.examples)}
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
		return schemeHint(*url, err)
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
