package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store/bolt"
)

// An explicit "key_format": "" in a --from line is refused (exit 2), as
// an empty --key-format is, not taken as the default.
func TestFromEmptyKeyFormatRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--key-format", ""); r.code != 2 {
		t.Fatalf("the flag: %s", r)
	}
	p := filepath.Join(e.dir, "kf.jsonl")
	if err := os.WriteFile(p, []byte(`{"url":"http://127.0.0.1:9/p","key_format":""}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run("enqueue", "--db", e.db, "--from", p); r.code != 2 {
		t.Errorf("--from with \"key_format\": \"\": want exit 2 like --key-format '', got\n%s", r)
	}
}

// show escapes a job's URL and header values too, as its reason, errors and
// history: a bidirectional override (U+202E) or a C1 control (U+009B, CSI)
// that validation lets through never reaches the terminal raw.
func TestShowEscapesURLAndHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p\u202eab", "-H", "X-A: a\u202eb\u009b2Jc", "--key", "k1")
	r := e.ok("show", "--db", e.db, "k1")
	for _, bad := range []string{"\u202e", "\u009b"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("show printed %q raw:\n%q", bad, r.stdout)
		}
	}
}

// The demo enqueues its jobs in kills+1 waves, one per runner life: fewer
// jobs than that would leave killed runners with nothing in flight, and
// its "runner SIGKILLs" line would count kills that proved nothing.
func TestDemoRefusesFewerJobsThanLives(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("demo", "--jobs", "2", "--kills", "3"); r.code != 2 || !strings.Contains(r.stderr, "kills+1") {
		t.Errorf("demo --jobs 2 --kills 3: got\n%s\nwant exit 2 asking for at least kills+1 jobs", r)
	}
	if r := e.run("demo", "--chaos", "--jobs", "5"); r.code != 2 || !strings.Contains(r.stderr, "= 21") {
		t.Errorf("demo --chaos --jobs 5: got\n%s\nwant exit 2: --chaos means 20 kills, so at least 21 jobs", r)
	}
}

// Repeated --data values are joined with '&', as curl joins repeated -d
// values, @FILE parts included; before, the last one silently won.
func TestRepeatedDataJoinedLikeCurl(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	part := filepath.Join(e.dir, "part.txt")
	if err := os.WriteFile(part, []byte("c=3"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--key", "d1",
		"--data", "a=1", "--data", "b=2", "--data", "@"+part)
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--key", "d2", "--data", "only")
	db, err := bolt.Open(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for key, want := range map[string]string{"d1": "a=1&b=2&c=3", "d2": "only"} {
		j, err := db.GetByKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if string(j.Request.Body) != want {
			t.Errorf("%s: stored body %q, want %q", key, j.Request.Body, want)
		}
	}
}

// enqueue --from counts the lines whose jobs were already stored under
// their keys apart from the new ones, as a single enqueue says "existing"
// (it said "enqueued 3 jobs" for three repeats).
func TestFromSummaryCountsExistingJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := filepath.Join(e.dir, "three.jsonl")
	var lines string
	for _, k := range []string{"f1", "f2", "f3"} {
		lines += `{"url":"http://127.0.0.1:9/p","key":"` + k + `","data":"x"}` + "\n"
	}
	if err := os.WriteFile(p, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.ok("enqueue", "--db", e.db, "--from", p); !strings.Contains(r.stdout, "enqueued 3 jobs (0 already stored under their keys, 0 refused)") {
		t.Errorf("first --from: %s", r)
	}
	if r := e.ok("enqueue", "--db", e.db, "--from", p); !strings.Contains(r.stdout, "enqueued 0 jobs (3 already stored under their keys, 0 refused)") {
		t.Errorf("repeated --from: %s", r)
	}
}
