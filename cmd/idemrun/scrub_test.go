package main

import (
	"strings"
	"testing"
)

// A database URL given where a command does not take one (a forgotten
// --db) is refused, exit 2, without its password in the refusal.
func TestStrayURLKeepsItsPassword(t *testing.T) {
	e := newEnv(t)
	u := "postgres://app:" + testPassword + "@127.0.0.1:1/jobs"
	for _, args := range [][]string{
		{"list", u},
		{"enqueue", "--url", "http://127.0.0.1:9/x", u},
		{"stats", u},
		{"run", u},
		{"watch", u},
		{"ui", u},
		{"compact", u},
		{"demo", u},
		{"bench", u},
		{"migrate", u},
		{"host", u},
		{"host", "list", u},
		{"host", "set", u, "--rate", "5/s"},
		{"host", "pause", u},
		{"backup", u},
		{"list", "--db=" + u, u},
	} {
		r := e.run(args...)
		noPassword(t, r)
		if r.code != exitUsage {
			t.Errorf("want exit 2:\n%s", r)
		}
		// The refusal still says what it was given, password masked.
		if !strings.Contains(r.stderr, "postgres://app:xxxxx@127.0.0.1:1/jobs") {
			t.Errorf("want the URL, password masked, in the refusal:\n%s", r)
		}
	}
}
