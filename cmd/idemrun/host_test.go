package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// hostList runs host list --json and returns the hosts by name.
func (e *env) hostList() map[string]map[string]any {
	e.t.Helper()
	r := e.ok("host", "list", "--json")
	out := map[string]map[string]any{}
	for _, h := range jsonArray(e.t, r) {
		out[h["host"].(string)] = h
	}
	return out
}

// hostFlow drives every host command on e's database, and checks what
// host list shows after each. With a runner working the database
// (worked), every job is enqueued for later, so none is sent meanwhile.
func hostFlow(t *testing.T, e *env, worked bool) {
	later := []string{"--run-at", "1h", "--deadline", "2h"}
	now := []string(nil)
	due := "1"
	if worked {
		now, due = later, "0"
	}
	e.ok(append([]string{"enqueue", "--url", "http://api.example.com/pay", "--key", "a1"}, now...)...)
	e.ok(append([]string{"enqueue", "--url", "http://api.example.com/pay", "--key", "a2"}, later...)...)
	e.ok(append([]string{"enqueue", "--url", "http://127.0.0.1:9/pay", "--key", "b1"}, now...)...)

	r := e.ok("host", "set", "API.example.com", "--rate", "40/s", "--burst", "5")
	if !strings.Contains(r.stdout, "api.example.com: rate 40/s, burst 5, concurrency -, settle -") {
		t.Errorf("host set said:\n%s", r)
	}
	e.ok("host", "set", "api.example.com", "--concurrency", "3", "--settle", "6s")
	e.ok("host", "pause", "127.0.0.1:9", "--note", "their outage")
	e.ok("host", "set", "*", "--rate", "100/m")

	hs := e.hostList()
	if len(hs) != 3 {
		t.Fatalf("host list --json shows %d hosts (%v); want *, api.example.com and 127.0.0.1:9", len(hs), hs)
	}
	a := hs["api.example.com"]
	p, _ := a["policy"].(map[string]any)
	if p == nil || p["rate"] != "40/s" || p["rate_per_second"] != 40.0 || p["burst"] != 5.0 || p["concurrency"] != 3.0 ||
		p["settle"] != "6s" || p["paused"] != false || p["updated_by"] != api.Actor() || a["pending"] != 2.0 || fmt.Sprint(a["due"]) != due || a["unknown"] != 0.0 {
		t.Errorf("api.example.com in host list --json: %v; want its policy by %s and 2 pending, %s due", a, api.Actor(), due)
	}
	b := hs["127.0.0.1:9"]
	if p, _ := b["policy"].(map[string]any); p == nil || p["paused"] != true || p["note"] != "their outage" || p["rate"] != nil || b["pending"] != 1.0 {
		t.Errorf("127.0.0.1:9 in host list --json: %v; want paused with the note, no rate, 1 pending", b)
	}
	if p, _ := hs["*"]["policy"].(map[string]any); p == nil || p["rate"] != "100/m" {
		t.Errorf("* in host list --json: %v; want rate 100/m", hs["*"])
	}

	r = e.ok("host", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "HOST") || !strings.Contains(lines[0], "BREAKER") {
		t.Fatalf("host list printed:\n%s", r.stdout)
	}
	for _, want := range [][]string{
		{"*", "own", "100/m", "-", "-", "-", "no", "0", "0", "0", "-", "-", "-", "-", "-", "-"},
		// Its own policy holds only the pause: *'s rate fills in.
		{"127.0.0.1:9", "own", "100/m", "-", "-", "-", "yes", "1", "0", due, "-", "-", "-", "-", "-", "-", "their", "outage"},
		{"api.example.com", "own", "40/s", "5", "3", "6s", "no", "2", "0", due, "-", "-", "-", "-", "-", "-"},
	} {
		found := false
		for _, l := range lines[1:] {
			if strings.Join(strings.Fields(l), " ") == strings.Join(want, " ") {
				found = true
			}
		}
		if !found {
			t.Errorf("host list has no line %q:\n%s", strings.Join(want, " "), r.stdout)
		}
	}

	// Bad input exits 2, names the value and what is accepted, and
	// changes nothing.
	before := e.run("host", "list", "--json").stdout
	for _, args := range [][]string{
		{"host", "set", "api.example.com", "--rate", "0/s"},
		{"host", "set", "api.example.com", "--rate", "fast"},
		{"host", "set", "api.example.com", "--rate", "-3/s"},
		{"host", "set", "api.example.com", "--burst", "0"},
		{"host", "set", "api.example.com", "--concurrency", "-1"},
		{"host", "set", "api.example.com", "--settle", "-5s"},
		{"host", "set", "api.example.com", "--settle", "2h"},
		{"host", "set", "api.example.com"},
		{"host", "set", "https://api.example.com", "--rate", "1/s"},
		{"host", "set", "api.example.com/v1", "--rate", "1/s"},
		{"host", "set", "user@api.example.com", "--rate", "1/s"},
		{"host", "set", "api example.com", "--rate", "1/s"},
		{"host", "pause", "*.example.com"},
		{"host", "resume"},
		{"host", "unset", "a", "b"},
		{"host", "list", "extra"},
		{"host", "frobnicate"},
		{"host"},
	} {
		r := e.run(args...)
		if r.code != exitUsage {
			t.Errorf("want exit 2, got:\n%s", r)
		}
		if strings.HasPrefix(r.stderr, "idemrun: invalid ") && !strings.Contains(r.stderr, "accepted: ") {
			t.Errorf("the refusal does not say what is accepted:\n%s", r)
		}
	}
	if after := e.run("host", "list", "--json").stdout; after != before {
		t.Errorf("refused commands changed the policies:\nbefore %s\nafter  %s", before, after)
	}

	e.ok("host", "resume", "127.0.0.1:9")
	if p, _ := e.hostList()["127.0.0.1:9"]["policy"].(map[string]any); p == nil || p["paused"] != false || p["note"] != nil {
		t.Errorf("after host resume: %v; want not paused, no note", p)
	}
	e.ok("host", "unset", "api.example.com")
	if h := e.hostList()["api.example.com"]; h == nil || h["policy"] != nil || h["pending"] != 2.0 {
		t.Errorf("after host unset, host list shows api.example.com as %v; want no policy, its 2 pending jobs", h)
	}
	if r := e.run("host", "unset", "api.example.com"); r.code != exitFailure || !strings.Contains(r.stderr, "no policy") {
		t.Errorf("host unset of a host without a policy: want exit 1 saying so, got:\n%s", r)
	}
	// Without its own policy the host shows the default's.
	r = e.ok("host", "list")
	if !regexpLine(r.stdout, "api.example.com", "*", "100/m") {
		t.Errorf("host list after unset:\n%s", r.stdout)
	}
}

// regexpLine reports whether out has a line whose first fields are
// fields.
func regexpLine(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func TestHostCommandsPostgres(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	e.ok("migrate")
	hostFlow(t, e, false)
}

func TestHostCommandsFile(t *testing.T) {
	t.Parallel()
	hostFlow(t, newEnv(t), false)
}

// With a runner holding the file, the host commands go through its
// admin socket.
func TestHostCommandsThroughRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.startRunner("--workers", "1")
	defer p.stop(syscall.SIGTERM)
	hostFlow(t, e, true)
}

// host list --json prints an array, empty on a store without policies
// or waiting jobs; the policy is null for a host without its own.
func TestHostListEmpty(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	e.ok("migrate")
	r := e.ok("host", "list", "--json")
	var a []any
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || len(a) != 0 {
		t.Errorf("host list --json on an empty store: %v, %v; want []", a, err)
	}
	e.ok("enqueue", "--url", "http://api.example.com/pay")
	if h := e.hostList()["api.example.com"]; h == nil || h["policy"] != nil {
		t.Errorf("a host with a job and no policy: %v; want policy null", h)
	}
	// --schema names the schema as for every command.
	if r := e.ok("host", "list", "--json", "--schema", e.schema); !strings.Contains(r.stdout, "api.example.com") {
		t.Errorf("host list --schema %s:\n%s", e.schema, r)
	}
	if r := e.run("host", "pause", "api.example.com", "--schema", e.schema+"_none"); r.code != exitUsage || !strings.Contains(r.stderr, "idemrun migrate") {
		t.Errorf("host pause on a schema without idemrun's tables: want exit 2 naming migrate, got:\n%s", r)
	}
}

// A policy may come before the first job: host set and host pause create
// a bbolt file that does not exist yet; bad input creates nothing.
func TestHostSetBeforeFirstJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run("host", "set", "api.example.com", "--settle", "-1s"); r.code != exitUsage || !strings.Contains(r.stderr, "settle") {
		t.Errorf("a negative --settle on a missing file: want exit 2 naming settle, got:\n%s", r)
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("bad input created the database (%v)", err)
	}
	e.ok("host", "set", "api.example.com", "--rate", "5/s")
	e.ok("host", "pause", "b.example.com", "--note", "later")
	hs := e.hostList()
	if p, _ := hs["api.example.com"]["policy"].(map[string]any); p == nil || p["rate"] != "5/s" {
		t.Errorf("host list after host set on a new file: %v", hs)
	}
	if p, _ := hs["b.example.com"]["policy"].(map[string]any); p == nil || p["paused"] != true {
		t.Errorf("host list after host pause on a new file: %v", hs)
	}
}
