package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/bolt/bolttest"
)

// recordNames opens e.db through the Go API with extra sensitive names, as
// an application would, so the file records them.
func recordNames(t *testing.T, e *env) {
	t.Helper()
	c, err := api.Open(e.db, &api.Options{SensitiveHeaders: []string{"X-Merchant-Pin"}, SensitiveParams: []string{"merchant_pin"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// An enqueue refused before the file is opened (the CLI's own check, of
// the flags or of a --from line) hides the parameters the file records as
// sensitive, not only the default ones; with a runner holding the file,
// whose names the check cannot read, it hides every parameter value.
// Found in reviews: the check used the default names alone.
func TestRefusedEnqueueHidesRecordedParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	recordNames(t, e)
	bad := []struct {
		stdin []byte
		args  []string
	}{
		{nil, []string{"enqueue", "--db", e.db, "--url", "http://127.0.0.1:99999/p?merchant_pin=PLANTED1&token=T"}},
		{nil, []string{"enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p", "--status-url", "http://127.0.0.1:9/s?merchant_pin=PLANTED1"}},
		{[]byte(`{"url":"http://127.0.0.1:99999/p?merchant_pin=PLANTED1"}` + "\n"), []string{"enqueue", "--db", e.db, "--from", "-"}},
	}
	check := func(when string) {
		for _, b := range bad {
			r := e.runStdin(b.stdin, b.args...)
			if r.code != 2 {
				t.Fatalf("%s: want exit 2:\n%s", when, r)
			}
			if strings.Contains(r.stderr, "PLANTED1") {
				t.Errorf("%s: a recorded sensitive parameter shown in clear:\n%s", when, r.stderr)
			}
		}
	}
	check("no runner")
	p := e.startRunner("--db", e.db)
	defer p.stop(syscall.SIGTERM)
	check("a runner holding the file")
}

// A damaged list of recorded names does not lock the file away: it opens,
// shows every header and parameter value redacted, and check reports the
// damage; an application opening it with its names rebuilds the list.
func TestDamagedSensitiveNamesFailClosedAndAreReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	recordNames(t, e)
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p?plain=VISIBLE1", "-H", "X-Plain: VISIBLE2", "--key", "k1")
	bolttest.PutMeta(t, e.db, "sensitive_headers", `["x-pin"`)
	r := e.run("check", e.db)
	if strings.Contains(r.stdout, "FAILED to open") || !strings.Contains(r.stdout, "sensitive_headers") {
		t.Errorf("check of a file with damaged names:\n%s\nwant it opened and the damage reported", r)
	}
	r = e.ok("show", "--db", e.db, "k1")
	if strings.Contains(r.stdout, "VISIBLE1") || strings.Contains(r.stdout, "VISIBLE2") || !strings.Contains(r.stderr, "shown redacted") {
		t.Errorf("show with damaged names: want every value hidden and a warning:\n%s", r)
	}
	recordNames(t, e) // the application's open replaces the damaged list
	if r := e.ok("check", e.db); strings.Contains(r.stdout, "sensitive_headers") {
		t.Errorf("check after the application reopened the file:\n%s", r)
	}
	if r := e.ok("show", "--db", e.db, "k1"); !strings.Contains(r.stdout, "VISIBLE1") || !strings.Contains(r.stdout, "VISIBLE2") {
		t.Errorf("show after the list was replaced: want plain values shown again:\n%s", r)
	}
}
