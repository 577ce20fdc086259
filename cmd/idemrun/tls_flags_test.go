package main

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// run --ca-file trusts a private CA for https targets besides the system's
// roots; without it the target's certificate is refused and nothing
// reaches it. Bad --ca-file, --client-cert and --client-key values are
// refused with exit 2 before the runner starts, naming the flag.
func TestRunCAFileAndClientCertFlags(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer ts.Close()
	e := newEnv(t)
	ca := filepath.Join(e.dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(e.dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	e.ok("enqueue", "--url", ts.URL+"/pay", "--key", "untrusted", "--max-attempts", "1")
	e.runProc("run", "--until-idle")
	if n := hits.Load(); n != 0 {
		t.Fatalf("without --ca-file the target got %d requests", n)
	}
	e.ok("enqueue", "--url", ts.URL+"/pay", "--key", "trusted")
	e.okProc("run", "--until-idle", "--ca-file", ca)
	if r := e.ok("show", "trusted", "--json"); !strings.Contains(r.stdout, `"state": "succeeded"`) || hits.Load() != 1 {
		t.Errorf("with --ca-file: %d requests, job\n%s", hits.Load(), r.stdout)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ca-file", filepath.Join(e.dir, "missing.pem")}, "invalid ca-file"},
		{[]string{"--ca-file", junk}, "invalid ca-file"},
		{[]string{"--client-cert", ca}, "--client-key"},
		{[]string{"--client-key", ca}, "--client-cert"},
		{[]string{"--client-cert", ca, "--client-key", junk}, "invalid client-cert"},
	} {
		r := e.run(append([]string{"run", "--until-idle"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("run %v: got\n%s\nwant exit 2 saying %q", c.args, r, c.want)
		}
	}
}
