package main

import (
	"io"
	"strings"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store/postgres"
)

// urlSecrets returns a scrubber for every database URL on the command
// line (as an argument, or a flag's value) and in $IDEMRUN_DB, or nil
// when there is none. A URL given where it was not expected (a stray
// argument, a HOST) is echoed in its refusal; this keeps its password out.
func urlSecrets(args []string, getenv func(string) string) func(string) string {
	var scrubs []func(string) string
	for _, a := range append(args, getenv("IDEMRUN_DB")) {
		if strings.HasPrefix(a, "-") {
			if i := strings.Index(a, "="); i >= 0 {
				a = a[i+1:]
			}
		}
		if api.IsURL(a) {
			scrubs = append(scrubs, postgres.Scrubber(a))
		}
	}
	if len(scrubs) == 0 {
		return nil
	}
	return func(s string) string {
		for _, f := range scrubs {
			s = f(s)
		}
		return s
	}
}

// scrubWriter writes through scrub. Each write is one message or log
// line, so a secret is never split across two.
type scrubWriter struct {
	w     io.Writer
	scrub func(string) string
}

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, s.scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
