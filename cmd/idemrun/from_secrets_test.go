package main

import (
	"strings"
	"testing"
)

// enqueue --from: a line that is not valid JSON, or whose field that may
// hold secrets has the wrong type, is refused without its text: before, the
// line or the field was echoed with default-sensitive values (a token
// parameter, an Authorization header) in clear (found in a review).
func TestFromLineRefusalNeverEchoesSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, line := range []string{
		`{"url":"http://127.0.0.1:9/p?token=PLANTED1","headers":{"Authorization":"Bearer PLANTED1"}`,
		`{"url":"http://127.0.0.1:9/p","headers":{"Authorization":"Bearer sk_PLANTED1","X-N":1}}`,
		`{"url":"http://127.0.0.1:9/p","header_lines":["Authorization: Bearer sk_PLANTED1", 5]}`,
		`{"url":"http://127.0.0.1:9/p?token=PLANTED1", "url":"x"}`,
	} {
		r := e.runStdin([]byte(line+"\n"), "enqueue", "--db", e.db, "--from", "-")
		if r.code != 2 {
			t.Fatalf("%s: want exit 2:\n%s", line, r)
		}
		if strings.Contains(r.stderr, "PLANTED1") {
			t.Errorf("a default-sensitive value shown in clear:\n%s", r.stderr)
		}
	}
}
