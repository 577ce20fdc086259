package main

import (
	"testing"
)

// show, show --json and list --json hide headers whose names are a
// credential's by the name rules (Authentication, X-JWT, X-Passphrase)
// and a token parameter after a ';': all were shown in clear before (found
// by a probe).
func TestShowHidesCredentialNamesByRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--db", e.db, "--url", "http://127.0.0.1:9/p?a=1;token=PLANTED1", "--key", "k1",
		"-H", "Authentication: PLANTED2", "-H", "X-JWT: PLANTED3", "-H", "X-Passphrase: PLANTED4")
	for _, args := range [][]string{{"show", "--db", e.db, "k1"}, {"show", "--db", e.db, "k1", "--json"}, {"list", "--db", e.db, "--json"}} {
		r := e.ok(args...)
		mustNotContain(t, args[0], r.stdout+r.stderr, "PLANTED1", "PLANTED2", "PLANTED3", "PLANTED4")
	}
}
