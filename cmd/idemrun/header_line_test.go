package main

import (
	"strings"
	"testing"
)

// A header line written Name=value (-H or a --from line's header_lines)
// is refused naming the header, without its value: before, the whole line,
// credential included, was printed (found by a probe).
func TestHeaderLineRefusalHidesValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := "http://127.0.0.1:9/p"
	for _, c := range []struct {
		args  []string
		stdin string
		name  string
	}{
		{[]string{"enqueue", "--db", e.db, "--url", u, "-H", "X-Api-Key=sk_live_PLANTED1"}, "", "X-Api-Key"},
		{[]string{"enqueue", "--db", e.db, "--url", u, "-H", "Cookie=sid=PLANTED1"}, "", "Cookie"},
		{[]string{"enqueue", "--db", e.db, "--from", "-"}, `{"url":"` + u + `","header_lines":["X-Api-Key=sk_live_PLANTED1"]}` + "\n", "X-Api-Key"},
	} {
		r := e.runStdin([]byte(c.stdin), c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.name) || !strings.Contains(r.stderr, "Name: value") {
			t.Errorf("%v: got\n%s\nwant exit 2 naming %s and saying Name: value is accepted", c.args, r, c.name)
		}
		mustNotContain(t, "stderr", r.stderr+r.stdout, "PLANTED1")
	}
}
