package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/idemrun/idemrun/api"
)

// filterFlags are the job filters list and the bulk actions take.
type filterFlags struct {
	states                                  *[]string
	host, since, until, keyPrefix, idPrefix *string
}

// addFilterFlags defines the filter flags on fs.
func addFilterFlags(fs *pflag.FlagSet, stateHelp string) *filterFlags {
	return &filterFlags{
		states:    fs.StringArray("state", nil, stateHelp),
		host:      fs.String("host", "", "only jobs whose URL has this host (api.example.com, 127.0.0.1:8080: with the port when it is not the scheme's default)"),
		since:     fs.String("since", "", "only jobs last updated at or after TIME: RFC 3339 (2026-12-02T10:00:00Z) or how long ago (90m or -90m: 90 minutes ago)"),
		until:     fs.String("until", "", "only jobs last updated before TIME (as --since)"),
		keyPrefix: fs.String("key-prefix", "", "only jobs whose idempotency key begins with this"),
		idPrefix:  fs.String("id-prefix", "", "only jobs whose id begins with this"),
	}
}

// set reports whether any filter beyond --state was given.
func (ff *filterFlags) set(fs *pflag.FlagSet) string {
	for _, name := range []string{"host", "since", "until", "key-prefix", "id-prefix"} {
		if fs.Changed(name) {
			return name
		}
	}
	return ""
}

// filter reads the flags, times relative to now; a state or time that
// does not parse is an *api.InvalidError naming its flag (the rest is
// checked by the api, whose errors flagged names).
func (ff *filterFlags) filter(now time.Time) (api.ListFilter, error) {
	ss, err := stateNames(*ff.states)
	if err != nil {
		return api.ListFilter{}, err
	}
	f := api.ListFilter{States: ss, Host: *ff.host, KeyPrefix: *ff.keyPrefix, IDPrefix: *ff.idPrefix}
	for _, t := range []struct {
		flag, v string
		to      *time.Time
	}{{"--since", *ff.since, &f.Since}, {"--until", *ff.until, &f.Until}} {
		if t.v == "" {
			continue
		}
		if *t.to, err = api.ParseAgo(t.v, now); err != nil {
			return api.ListFilter{}, &api.InvalidError{Field: t.flag, Value: fmt.Sprintf("%q", t.v), Accepted: api.AgoAccepted}
		}
	}
	return f, nil
}

// flagged is err with the api's name of a filter field replaced by the
// flag that sets it.
func flagged(err error) error {
	ie, ok := errors.AsType[*api.InvalidError](err)
	if !ok {
		return err
	}
	switch ie.Field {
	case "state", "host", "since", "until", "key_prefix", "id_prefix", "sort", "as", "note":
		c := *ie
		c.Field = "--" + strings.ReplaceAll(ie.Field, "_", "-")
		return &c
	}
	return err
}

// bulkFlags are the flags of retry, cancel and resolve that make them
// act on every job a filter matches.
type bulkFlags struct {
	all, dryRun *bool
	filter      *filterFlags
}

func addBulkFlags(fs *pflag.FlagSet, a api.BulkAction) *bulkFlags {
	st := api.BulkState(a)
	return &bulkFlags{
		all:    fs.Bool("all", false, fmt.Sprintf("%s every job the filters match (--state %s required) instead of one job; they are taken when the command runs, and changed %d per transaction", a, st, api.BulkBatch)),
		dryRun: fs.Bool("dry-run", false, "with --all: print how many jobs match and change nothing"),
		filter: addFilterFlags(fs, fmt.Sprintf("with --all: the jobs' state, %s (%s applies to %s jobs only)", st, a, st)),
	}
}

// check refuses the bulk flags without --all, and --all with a job id.
func (b *bulkFlags) check(fs *pflag.FlagSet, name string) error {
	if !*b.all {
		for _, f := range []string{"dry-run", "state", "host", "since", "until", "key-prefix", "id-prefix"} {
			if fs.Changed(f) {
				return usagef("%s: --%s needs --all (for one job, give its id alone)", name, f)
			}
		}
		return nil
	}
	if fs.NArg() > 0 {
		return usagef("%s: --all acts on the jobs the filters match, not on a job id (got %q); give --all --state %s, or one job id", name, fs.Arg(0), api.BulkState(api.BulkAction(name)))
	}
	if len(*b.filter.states) == 0 {
		st := api.BulkState(api.BulkAction(name))
		return &api.InvalidError{Field: "--state", Value: `""`, Accepted: fmt.Sprintf("with --all, the state %s applies to: --state %s", name, st)}
	}
	return nil
}

// bulk runs a bulk action as the CLI's flags asked and prints what it
// did.
func (m *Main) bulk(ctx context.Context, fs *pflag.FlagSet, db string, a api.BulkAction, b *bulkFlags, as, note string, asJSON bool) error {
	f, err := b.filter.filter(time.Now())
	if err != nil {
		return err
	}
	if strings.TrimSpace(note) == "" {
		return &api.InvalidError{Field: "--note", Value: `""`, Accepted: fmt.Sprintf("with --all, a non-empty note saying why (recorded on each job, at most %d bytes)", api.MaxNoteLen)}
	}
	dbt, err := m.db(fs, db)
	if err != nil {
		return err
	}
	svc, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	res, err := svc.Bulk(ctx, api.BulkRequest{Filter: f, Action: a, As: api.State(as), Actor: m.actor(), Note: note, DryRun: *b.dryRun})
	if err != nil {
		if res.Changed > 0 {
			fmt.Fprintf(m.Stdout, "%s: %d jobs changed before the error\n", a, res.Changed)
		}
		return flagged(err)
	}
	if asJSON {
		if res.Unchanged == nil {
			res.Unchanged = []api.BulkUnchanged{}
		}
		return m.printJSON(res)
	}
	if *b.dryRun {
		fmt.Fprintf(m.Stdout, "%s --dry-run: %s match; nothing changed (run it again without --dry-run to %s them)\n", a, plural(res.Matched, "job", "jobs"), a)
		return nil
	}
	fmt.Fprintf(m.Stdout, "%s: %d of %s changed\n", a, res.Changed, plural(res.Matched, "matched job", "matched jobs"))
	if res.UnchangedCount == 0 {
		return nil
	}
	fmt.Fprintf(m.Stdout, "%d unchanged:\n", res.UnchangedCount)
	tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', 0)
	const shown = 10
	for i, u := range res.Unchanged {
		if i == shown {
			break
		}
		fmt.Fprintf(tw, "  %s\t%s\n", u.ID, printable(u.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.UnchangedCount > shown {
		fmt.Fprintf(m.Stdout, "  … and %d more (--json lists up to %d)\n", res.UnchangedCount-shown, api.MaxBulkUnchanged)
	}
	return nil
}
