package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store/bolt"
)

// compact through the CLI: it refuses a file another process holds and
// changes nothing, then rewrites it keeping every job and key.
func TestCompactCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("compact"); r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("compact before any enqueue: got\n%s\nwant exit 1 naming the missing file", r)
	}
	for i := range 3 {
		e.ok("enqueue", "--url", "http://127.0.0.1:1/pay", "--key", "c-"+strconv.Itoa(i), "--data", `{"n":1}`)
	}
	before := e.statsOf()
	if r := e.run("compact", "extra"); r.code != 2 {
		t.Errorf("compact with an argument: got\n%s\nwant exit 2", r)
	}

	held, err := bolt.Open(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(e.db)
	r := e.run("compact")
	held.Close()
	if r.code == 0 || !strings.Contains(r.stderr, "stop the runner") {
		t.Errorf("compact of a held file: got\n%s\nwant a refusal saying to stop the runner", r)
	}
	if now, _ := os.Stat(e.db); !os.SameFile(fi, now) {
		t.Error("a refused compact replaced the file")
	}

	out := jsonObject(t, e.ok("compact", "--json"))
	for _, k := range []string{"bytes_before", "bytes_after", "free_pages_before", "jobs", "took_ms"} {
		if _, ok := out[k]; !ok {
			t.Errorf("compact --json: no %q in %v", k, out)
		}
	}
	if out["jobs"] != float64(3) {
		t.Errorf("compact --json jobs = %v; want 3", out["jobs"])
	}
	if r := e.ok("compact"); !strings.Contains(r.stdout, "3 jobs kept") {
		t.Errorf("compact: got\n%s\nwant the jobs kept", r)
	}
	if after := e.statsOf(); after["pending"] != before["pending"] || after["pending"] != 3 {
		t.Errorf("stats after compact %v; before %v", after, before)
	}
	if r := e.ok("check"); !strings.Contains(r.stdout, "ok") {
		t.Errorf("check after compact: got\n%s", r)
	}
	if r := e.run("enqueue", "--url", "http://127.0.0.1:1/pay", "--key", "c-0", "--data", `{"n":2}`); r.code == 0 {
		t.Errorf("a key conflict after compact was accepted:\n%s", r)
	}
}
