package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/fsutil"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/postgres"
)

func (m *Main) backup(ctx context.Context, args []string) error {
	fs, db := m.flags("backup", "OUT")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("backup: give exactly one output file")
	}
	out := fs.Arg(0)
	if out == "" {
		return &api.InvalidError{Field: "OUT", Value: `""`, Accepted: "a path for the copy, in an existing directory"}
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return &api.InvalidError{Field: "OUT", Value: fmt.Sprintf("%q", out), Accepted: "a path in an existing directory (" + filepath.Dir(out) + " is not one)"}
	}
	src, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	if src.isURL() {
		return usagef("backup: %s is a Postgres database; back it up with Postgres's own tools, e.g. pg_dump --schema=%s (idemrun backup copies a bbolt file)", src, schemaOrDefault(src))
	}
	if abs1, _ := filepath.Abs(out); abs1 != "" {
		if abs2, _ := filepath.Abs(src.path); abs1 == abs2 {
			return &api.InvalidError{Field: "OUT", Value: fmt.Sprintf("%q", out), Accepted: "a path other than the database itself"}
		}
	}
	if _, err := os.Stat(out); err == nil {
		return &api.InvalidError{Field: "OUT", Value: fmt.Sprintf("%q", out), Accepted: "a path that does not exist yet (backup never overwrites)"}
	}
	svc, err := m.openService(src, false)
	if err != nil {
		return err
	}
	defer svc.Close()
	// A name of its own (mode 0600): a backup killed midway leaves its
	// partial copy behind, which must not block the next one.
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmp := f.Name()
	n, err := svc.Backup(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	if err := fsutil.Publish(tmp, out); err != nil {
		os.Remove(tmp)
		if errors.Is(err, os.ErrExist) {
			return &api.InvalidError{Field: "OUT", Value: fmt.Sprintf("%q", out), Accepted: "a path that does not exist yet (backup never overwrites; it was created while the backup ran)"}
		}
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(m.Stdout, "backup: wrote %d bytes to %s\n", n, out)
	return nil
}

func (m *Main) compact(ctx context.Context, args []string) error {
	fs, db := m.flags("compact", "[--json]")
	asJSON := fs.Bool("json", false, "print the result as a JSON object")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("compact: unexpected argument %q", fs.Arg(0))
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	if dbt.isURL() {
		return usagef("compact: %s is a Postgres database, which reclaims space itself (autovacuum); to return it to the system run VACUUM FULL on %s.jobs with the runners stopped (idemrun compact rewrites a bbolt file)", dbt, schemaOrDefault(dbt))
	}
	path := dbt.path
	res, err := bolt.Compact(path, &bolt.Options{LockTimeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			return fmt.Errorf("compact: %w; compact needs the file to itself: stop the runner and any other idemrun process using %s, then run compact again", err, path)
		}
		if errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("compact: %w; %s", err, compactUnsupportedHint)
		}
		return fmt.Errorf("compact: %w", err)
	}
	if *asJSON {
		return m.printJSON(res)
	}
	fmt.Fprintf(m.Stdout, "compact: %s %d → %d bytes (%d free pages dropped), %d jobs kept, %.0f ms\n",
		path, res.BytesBefore, res.BytesAfter, res.FreePagesBefore, res.Jobs, res.TookMs)
	return nil
}

func (m *Main) check(ctx context.Context, args []string) error {
	fs, db := m.flags("check", "[FILE]   (exit 0 healthy; 1 damaged, or not an idemrun database; 2 nothing to check: missing, empty, a directory)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("check: give at most one file")
	}
	// The argument names the database as --db would: a URL takes
	// --schema or $IDEMRUN_SCHEMA, a file refuses a --schema.
	name := *db
	if fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	dbt, err := m.db(fs, name)
	if err != nil {
		return err
	}
	path := dbt.String()
	c, err := m.open(dbt.path, dbt.options(&api.Options{ReadOnly: true, Direct: true, LockTimeout: 2 * time.Second}))
	if err != nil {
		if dbt.isURL() {
			return openDBError(dbt, err)
		}
		if errors.Is(err, bolt.ErrLocked) {
			return fmt.Errorf("%w; check a copy instead: idemrun backup COPY && idemrun check COPY", err)
		}
		if notAFile(err) {
			// Nothing to check: invalid input (exit 2), not damage.
			return &dbOpenError{err}
		}
		fmt.Fprintf(m.Stdout, "check: %s: FAILED to open: %s\n", path, checkOpenHint(err))
		return &silentError{code: exitFailure}
	}
	defer c.Close()
	rep, err := c.Check(ctx)
	if err != nil {
		fmt.Fprintf(m.Stdout, "check: %s: FAILED: %v\n", path, err)
		return &silentError{code: exitFailure}
	}
	if !rep.OK() {
		fmt.Fprintf(m.Stdout, "check: %s: %d jobs, %d problems:\n", path, rep.Jobs, len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(m.Stdout, "  %s\n", p)
		}
		return &silentError{code: exitFailure}
	}
	what := "bbolt pages, counters, indexes and key map consistent"
	if dbt.isURL() {
		what = "every job record decodes and agrees with its columns, keys and leases"
	}
	fmt.Fprintf(m.Stdout, "check: %s: ok (%d jobs; %s)\n", path, rep.Jobs, what)
	return nil
}

// notAFile reports whether a database did not open because its path
// holds nothing to check: no file, an empty one, or a directory.
func notAFile(err error) bool {
	if errors.Is(err, bolt.ErrNoDatabase) {
		return true
	}
	fe, ok := errors.AsType[*bolt.FileError](err)
	return ok && (fe.Problem == bolt.FileEmpty || fe.Problem == bolt.FileIsDirectory)
}

// schemaOrDefault is the schema of a Postgres target, named.
func schemaOrDefault(db dbTarget) string {
	if db.schema == "" {
		return postgres.DefaultSchema
	}
	return db.schema
}

func (m *Main) watch(ctx context.Context, args []string) error {
	fs, db := m.flags("watch", "[--interval D] [--count N]")
	interval := fs.Duration("interval", time.Second, "refresh interval")
	count := fs.Int("count", 0, "stop after N refreshes (0: until interrupted)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("watch: unexpected argument %q", fs.Arg(0))
	}
	if *interval < 100*time.Millisecond || *interval > time.Hour {
		return &api.InvalidError{Field: "interval", Value: interval.String(), Accepted: "a duration from 100ms to 1h"}
	}
	if *count < 0 {
		return &api.InvalidError{Field: "count", Value: fmt.Sprint(*count), Accepted: "0 or more"}
	}
	path, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	tty := isTTY(m.Stdout)
	var prev api.Stats
	prevAt := time.Now()
	for i := 0; *count == 0 || i < *count; i++ {
		st, oldest, err := m.watchRead(ctx, path, tty)
		if err != nil {
			if prev == nil {
				return err
			}
			// Later refreshes report and go on (a runner restarting holds
			// the file for a moment before its socket is up).
			fmt.Fprintf(m.Stderr, "idemrun watch: %s\n", withHint(err))
			if !watchWait(ctx, *interval) {
				return nil
			}
			continue
		}
		now := time.Now()
		done := st["succeeded"] + st["failed"] + st["canceled"]
		// finished/s is the growth of the end states between refreshes.
		// Jobs also leave them (the retention sweep, a retry); when more
		// left than arrived the rate is not known, and says so rather than
		// going negative.
		rate := "0.0"
		if prev != nil {
			pd := prev["succeeded"] + prev["failed"] + prev["canceled"]
			if d := done - pd; d >= 0 {
				rate = fmt.Sprintf("%.1f", float64(d)/now.Sub(prevAt).Seconds())
			} else {
				rate = "n/a"
			}
		}
		if tty {
			fmt.Fprint(m.Stdout, "\x1b[H\x1b[2J")
			fmt.Fprintf(m.Stdout, "idemrun watch  %s  (every %s)\n\n", now.Format(time.TimeOnly), *interval)
			tw := tabwriter.NewWriter(m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
			for _, s := range sortedStates(st) {
				fmt.Fprintf(tw, "%s\t%d\t\n", s, st[s])
			}
			fmt.Fprintf(tw, "finished/s\t%s\t\n", rate)
			tw.Flush()
			for _, s := range watchOldest {
				if len(oldest[s]) == 0 {
					continue
				}
				fmt.Fprintf(m.Stdout, "\noldest %s:\n", s)
				for _, j := range oldest[s] {
					fmt.Fprintf(m.Stdout, "  %s  %s  %s\n", j.ID, ago(j.UpdatedAt), trunc(firstNonEmpty(j.Reason, j.LastError), 90))
				}
			}
		} else {
			var parts []string
			for _, s := range sortedStates(st) {
				parts = append(parts, fmt.Sprintf("%s=%d", s, st[s]))
			}
			fmt.Fprintf(m.Stdout, "%s %s finished/s=%s\n", now.Format(time.RFC3339), strings.Join(parts, " "), rate)
		}
		prev, prevAt = st, now
		if *count != 0 && i == *count-1 {
			break
		}
		if !watchWait(ctx, *interval) {
			return nil
		}
	}
	return nil
}

// watchOldest are the states whose oldest jobs watch lists on a terminal.
var watchOldest = []store.State{store.StateUnknown, store.StateNeedsAttention}

// watchRead is one refresh's reading: the counts and, with lists, the
// oldest jobs of each watchOldest state. It opens the file (or the
// runner's socket) and closes it before returning: held across the wait,
// the file's lock would keep a runner from starting, and a restarted
// runner's new socket would go unseen.
func (m *Main) watchRead(ctx context.Context, path dbTarget, lists bool) (api.Stats, map[store.State][]*api.Job, error) {
	svc, err := m.openService(path, false)
	if err != nil {
		return nil, nil, err
	}
	defer svc.Close()
	st, err := svc.Stats(ctx)
	if err != nil || !lists {
		return st, nil, err
	}
	oldest := map[store.State][]*api.Job{}
	for _, s := range watchOldest {
		if page, err := svc.List(ctx, api.ListFilter{States: []store.State{s}, Limit: 5, Oldest: true}); err == nil {
			oldest[s] = page.Jobs
		}
	}
	return st, oldest, nil
}

// watchWait waits d, or reports false when ctx ends first.
func watchWait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
