package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// show adds the resolve command to a needs_attention job, whose reason
// says in the runner's terms what to check and that a person resolves it;
// other states get none.
func TestShowAddsResolveCommand(t *testing.T) {
	t.Parallel()
	reason := "key mismatch: the target answered 422; a person must check with the target, then resolve the job as succeeded or failed"
	j := &api.Job{ID: "0193abcd", Key: "k", State: store.StateNeedsAttention, Reason: reason, Method: "POST", URL: "http://h/x"}
	var buf bytes.Buffer
	if err := renderJob(&buf, j); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, reason) || !strings.Contains(out, "resolve with  idemrun resolve 0193abcd --as succeeded|failed --note TEXT") {
		t.Errorf("show of a needs_attention job:\n%s\nwant its reason and the resolve command", out)
	}
	for _, st := range []store.State{store.StateFailed, store.StateUnknown, store.StateSucceeded} {
		j.State = st
		buf.Reset()
		if err := renderJob(&buf, j); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "idemrun resolve") {
			t.Errorf("show of a %s job names resolve:\n%s", st, buf.String())
		}
	}
}
