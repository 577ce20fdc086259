package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/storetest"
)

// Damaged and read-only database files at the command line: `idemrun
// check` tells a healthy file from a damaged one, and every command on a
// damaged or unwritable file fails with an error naming it — never a panic
// or a goroutine dump.

// fillDB writes a database of 60 jobs with 1 KiB bodies at path.
func fillDB(t *testing.T, path string) {
	t.Helper()
	c, err := api.Open(path, &api.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		_, err := c.Enqueue(context.Background(), api.Request{URL: fmt.Sprintf("http://127.0.0.1:9/pay/%d", i), Body: bytes.Repeat([]byte("b"), 1<<10)},
			api.EnqueueOptions{Key: fmt.Sprintf("damaged-%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// noCrash fails when a command's output shows a panic or a goroutine dump.
func noCrash(t *testing.T, r result) {
	t.Helper()
	out := r.stdout + r.stderr
	if strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") || strings.Contains(out, "fatal error:") {
		if len(out) > 1500 {
			out = out[:1500] + "…"
		}
		t.Errorf("idemrun %s crashed instead of reporting (exit %d):\n%s", strings.Join(quoteArgs(r.args), " "), r.code, out)
	}
}

// `idemrun check FILE` passes a healthy file and reports each damaged copy
// with exit 1, naming it, without panicking.
func TestCLICheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fillDB(t, e.db)
	r := e.run("check", e.db)
	if r.code != 0 || !strings.Contains(r.stdout, "ok") || !strings.Contains(r.stdout, "60 jobs") {
		t.Errorf("check of a healthy file: got\n%s\nwant exit 0, ok, 60 jobs", r)
	}
	if r := e.run("check"); r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Errorf("check of $IDEMRUN_DB: got\n%s\nwant exit 0 and ok", r)
	}
	// A path with nothing to check is invalid input (exit 2); a file
	// that is there but damaged is a failed check (exit 1, below).
	missing := filepath.Join(e.dir, "missing.db")
	if r := e.run("check", missing); r.code != exitUsage || !strings.Contains(r.stderr, "missing.db does not exist") {
		t.Errorf("check of a missing file: got\n%s\nwant exit 2 naming it", r)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("check created %s (stat err %v)", missing, err)
	}
	empty := filepath.Join(e.dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run("check", empty); r.code != exitUsage || !strings.Contains(r.stderr, "empty.db is empty") {
		t.Errorf("check of an empty file: got\n%s\nwant exit 2 saying it is empty", r)
	}
	if r := e.run("check", e.dir); r.code != exitUsage || !strings.Contains(r.stderr, "is a directory") {
		t.Errorf("check of a directory: got\n%s\nwant exit 2 saying it is a directory", r)
	}
	for name, path := range storetest.DamagedCopies(t, e.db, e.dir, "damaged-") {
		t.Run(name, func(t *testing.T) {
			e := e.with(t)
			r := e.run("check", path)
			noCrash(t, r)
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, filepath.Base(path)) {
				t.Errorf("check of a damaged file: got\n%s\nwant exit 1 naming %s", r, filepath.Base(path))
			}
			if strings.Contains(r.stdout, ": ok (") {
				t.Errorf("check calls a damaged file healthy:\n%s", r)
			}
		})
	}
}

// show, list and stats on a damaged file fail with an error that names the
// file, never a panic. Each runs as a process: in this one, an open that
// fails on a damaged freelist leaves the file locked until the collector
// closes it, so the next command on the file would meet the lock, not the
// damage.
func TestCLIDamagedFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fillDB(t, e.db)
	for name, path := range storetest.DamagedCopies(t, e.db, e.dir, "damaged-") {
		t.Run(name, func(t *testing.T) {
			e := e.with(t)
			for _, args := range [][]string{{"show", "damaged-30"}, {"list"}, {"list", "--json", "--limit", "10000"}, {"stats"}} {
				r := e.runProc(append(args, "--db", path)...)
				noCrash(t, r)
				if r.code == 0 {
					// A damaged copy may still answer a small read; then it
					// must have printed something.
					if r.stdout == "" {
						t.Errorf("%v on a damaged file: exit 0 with no output:\n%s", args, r)
					}
					continue
				}
				// A damaged key map may honestly not find the job.
				notFound := r.code == 1 && strings.Contains(r.stderr, "job not found")
				if !notFound && !strings.Contains(r.stderr, filepath.Base(path)) {
					t.Errorf("%v on a damaged file: got\n%s\nwant an error naming %s", args, r, filepath.Base(path))
				}
			}
		})
	}
}

// exitCode runs cmd and returns its exit code and output.
func exitCode(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: cmd.Args[1:], stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return r
}

// `check URL` reads the schema that --schema or $IDEMRUN_SCHEMA names, as
// `check --db URL` does.
func TestCheckURLArgumentTakesSchema(t *testing.T) {
	e := pgEnv(t)
	e.ok("migrate")
	e.ok("enqueue", "--url", "http://127.0.0.1:9/pay", "--key", "k1")
	url, schema := e.db, e.schema
	bare := e.with(t)
	bare.db = "" // the URL comes from the argument alone
	if r := bare.ok("check", url); !strings.Contains(r.stdout, "ok (1 jobs") {
		t.Errorf("check URL with $IDEMRUN_SCHEMA: want the schema's 1 job:\n%s", r)
	}
	bare.schema = ""
	if r := bare.ok("check", "--schema", schema, url); !strings.Contains(r.stdout, "ok (1 jobs") {
		t.Errorf("check URL --schema: want the schema's 1 job:\n%s", r)
	}
	if r := bare.run("check", "--schema", schema, e.dir+"/jobs.db"); r.code != exitUsage || !strings.Contains(r.stderr, "schema") {
		t.Errorf("check FILE --schema: want exit 2 refusing the schema:\n%s", r)
	}
}
