package main

import (
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// With none of its variables set, a manual action records the name of
// the process's user, not "unknown".
func TestActor(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil || u.Username == "" {
		t.Skipf("no user name for this uid (%v)", err)
	}
	m := &Main{Getenv: func(string) string { return "" }}
	if got := m.actor(); got != u.Username {
		t.Errorf("actor() with no variables = %q, want %q", got, u.Username)
	}
	m.Getenv = func(k string) string { return map[string]string{"USER": "alice", "IDEMRUN_ACTOR": ""}[k] }
	if got := m.actor(); got != "alice" {
		t.Errorf("actor() with USER=alice = %q, want alice", got)
	}

	db := filepath.Join(t.TempDir(), "jobs.db")
	if code, _, stderr := hintRun(t, "enqueue", "--db", db, "--url", "http://127.0.0.1:9/x", "--key", "k1", "--run-at", "10m"); code != 0 {
		t.Fatalf("enqueue: exit %d: %s", code, stderr)
	}
	if code, _, stderr := hintRun(t, "cancel", "--db", db, "k1", "--note", "not needed"); code != 0 {
		t.Fatalf("cancel: exit %d: %s", code, stderr)
	}
	_, out, _ := hintRun(t, "show", "--db", db, "k1")
	if !strings.Contains(out, "by "+u.Username+": not needed") {
		t.Errorf("show after a cancel with no variables set:\n%s\nwant the action by %s", out, u.Username)
	}
}
