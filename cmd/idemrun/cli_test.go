package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// The foundation contract: enqueue → list → show → stats → cancel with
// --json, the shapes scripts rely on, duplicate and conflicting keys.
func TestCLIContractJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	url := tg.url("/payments")

	// No file yet: read commands say so and create nothing.
	if r := e.run("stats", "--json"); r.code != 1 || !strings.Contains(r.stderr, "no database file") {
		t.Errorf("stats before any enqueue: got\n%s\nwant exit 1 naming the missing file", r)
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Fatalf("stats created %s (stat err %v); only enqueue may create the file", e.db, err)
	}

	enq := []string{"enqueue", "--url", url, "-H", "Content-Type: application/json", "--data", `{"amount":1000}`, "--key", "order-1", "--json"}
	r := e.ok(enq...)
	first := jsonObject(t, r)
	checkJobShape(t, "enqueue --json", first)
	for f, want := range map[string]any{"key": "order-1", "state": "pending", "method": "POST", "url": url, "attempts": 0.0, "last_error": "", "last_status": 0.0} {
		if got := first[f]; got != want {
			t.Errorf("enqueue --json: %s = %#v, want %#v", f, got, want)
		}
	}
	if ex, ok := first["existing"]; ok && ex != false {
		t.Errorf("first enqueue: existing = %#v, want absent or false", ex)
	}
	id := first["id"].(string)
	fi, err := os.Stat(e.db)
	if err != nil {
		t.Fatalf("enqueue did not create %s: %v", e.db, err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("database file mode: got %04o, want 0600", got)
	}

	// The same request under the same key: the existing job, nothing new.
	again := jsonObject(t, e.ok(enq...))
	if again["existing"] != true || again["id"] != id {
		t.Errorf("second identical enqueue: got existing=%#v id=%#v, want existing=true id=%s", again["existing"], again["id"], id)
	}
	plain := e.ok(enq[:len(enq)-1]...)
	if !strings.Contains(plain.stdout, "existing") || !strings.Contains(plain.stdout, id) {
		t.Errorf("plain identical enqueue: got\n%s\nwant it to say existing and name %s", plain, id)
	}

	// The same key with a different body: refused, naming the holder.
	conflict := e.run("enqueue", "--url", url, "-H", "Content-Type: application/json", "--data", `{"amount":2000}`, "--key", "order-1")
	if conflict.code != 1 || !strings.Contains(conflict.stderr, id) {
		t.Errorf("same key, different body: got\n%s\nwant exit 1 and a message naming job %s", conflict, id)
	}

	second := jsonObject(t, e.ok("enqueue", "--url", url, "--method", "put", "--data", "x", "--json"))
	checkJobShape(t, "enqueue --json (generated key)", second)
	id2 := second["id"].(string)
	if second["method"] != "PUT" || second["key"] == "" || second["key"] == "order-1" {
		t.Errorf("enqueue without --key: got method=%#v key=%#v, want PUT and a generated key", second["method"], second["key"])
	}

	list := jsonArray(t, e.ok("list", "--json"))
	if len(list) != 2 {
		t.Fatalf("list --json: got %d jobs, want 2:\n%v", len(list), list)
	}
	got := map[string]bool{}
	for i, j := range list {
		checkJobShape(t, fmt.Sprintf("list --json [%d]", i), j)
		got[j["id"].(string)] = true
	}
	if !got[id] || !got[id2] {
		t.Errorf("list --json ids: got %v, want %s and %s", got, id, id2)
	}
	if r := e.ok("list", "--json", "--state", "canceled"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("list --json with no match: got %q, want []", r.stdout)
	}

	for _, arg := range []string{id, "order-1"} {
		j := e.showJob(arg)
		checkJobShape(t, "show --json "+arg, j)
		if j["id"] != id || j["key"] != "order-1" || j["state"] != "pending" {
			t.Errorf("show --json %s: got id=%v key=%v state=%v, want %s order-1 pending", arg, j["id"], j["key"], j["state"], id)
		}
	}
	if r := e.run("show", "no-such-job"); r.code != 1 {
		t.Errorf("show of an unknown id: got\n%s\nwant exit 1", r)
	}

	st := e.statsOf()
	if st["pending"] != 2 || st["canceled"] != 0 {
		t.Errorf("stats --json: got %v, want pending=2 and the rest 0", st)
	}

	c := jsonObject(t, e.ok("cancel", id, "--json"))
	if c["state"] != "canceled" || c["id"] != id {
		t.Errorf("cancel --json: got id=%v state=%v, want %s canceled", c["id"], c["state"], id)
	}
	if j := e.showJob(id); j["state"] != "canceled" {
		t.Errorf("show after cancel: got state %v, want canceled", j["state"])
	}
	if r := e.run("cancel", id); r.code != 1 || !strings.Contains(r.stderr, "canceled") {
		t.Errorf("cancel of a canceled job: got\n%s\nwant exit 1 with the illegal transition", r)
	}
	st = e.statsOf()
	if st["pending"] != 1 || st["canceled"] != 1 {
		t.Errorf("stats after cancel: got %v, want pending=1 canceled=1", st)
	}
	pl := e.ok("list")
	if !strings.Contains(pl.stdout, id) || !strings.Contains(pl.stdout, "canceled") {
		t.Errorf("plain list: got\n%s\nwant the canceled job listed", pl)
	}
	// --db wins over IDEMRUN_DB.
	other := filepath.Join(e.dir, "other.db")
	e.ok("enqueue", "--db", other, "--url", url)
	if st := e.statsOf("--db", other); st["pending"] != 1 {
		t.Errorf("stats --db other: got %v, want one pending job", st)
	}
	if st := e.statsOf(); st["pending"] != 1 || st["canceled"] != 1 {
		t.Errorf("stats of IDEMRUN_DB after enqueue --db other: got %v, want unchanged pending=1 canceled=1", st)
	}
	if n := tg.total(); n != 0 {
		t.Errorf("target got %d requests with no runner, want 0", n)
	}
}

// dbState is what a command must leave unchanged when it refuses input.
type dbState struct {
	stats, list string
	sum         [32]byte
}

func (e *env) dbState(db string) dbState {
	e.t.Helper()
	b, err := os.ReadFile(db)
	if err != nil {
		e.t.Fatal(err)
	}
	return dbState{
		stats: e.ok("stats", "--json", "--db", db).stdout,
		list:  e.ok("list", "--json", "--db", db).stdout,
		sum:   sha256.Sum256(b),
	}
}

// Every bad input is refused with exit 2, a message naming the field, and
// nothing written: the database is unchanged, a missing file stays missing.
func TestCLIInvalidInputRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const u = "http://127.0.0.1:9/pay"
	e.ok("enqueue", "--url", u, "--key", "existing-job", "--data", "x")
	big := filepath.Join(e.dir, "big.bin")
	if err := os.WriteFile(big, make([]byte, 1<<20+1), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(e.dir, "exact.bin")
	if err := os.WriteFile(exact, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	longURL := "http://127.0.0.1/" + strings.Repeat("a", 8<<10)
	tests := []struct {
		name string
		args []string
		want string // the message must contain this (it names the field)
	}{
		{"ftp url", []string{"enqueue", "--url", "ftp://x"}, "invalid url"},
		{"url with user:password", []string{"enqueue", "--url", "http://user:pa55word@h/x"}, "invalid url"},
		{"url without host", []string{"enqueue", "--url", "http://"}, "invalid url"},
		{"url with bad port", []string{"enqueue", "--url", "http://h:99999/"}, "invalid url"},
		{"url over 8 KiB", []string{"enqueue", "--url", longURL}, "invalid url"},
		{"no url", []string{"enqueue"}, "--url"},
		{"header without colon", []string{"enqueue", "--url", u, "-H", "X-NoColon"}, "invalid header"},
		{"header with CR LF", []string{"enqueue", "--url", u, "-H", "X-A: a\r\nX-Injected: b"}, "invalid header X-A"},
		{"header with bad name", []string{"enqueue", "--url", u, "-H", "Bad Name: x"}, "invalid header name"},
		{"idempotency-key header", []string{"enqueue", "--url", u, "-H", "Idempotency-Key: mine"}, "invalid header name"},
		{"key of 256 chars", []string{"enqueue", "--url", u, "--key", strings.Repeat("k", 256)}, "invalid key"},
		{"empty key", []string{"enqueue", "--url", u, "--key", ""}, "invalid key"},
		{"key with control char", []string{"enqueue", "--url", u, "--key", "ab\x01cd"}, "invalid key"},
		{"key with newline", []string{"enqueue", "--url", u, "--key", "ab\ncd"}, "invalid key"},
		{"body over 1 MiB", []string{"enqueue", "--url", u, "--data-file", big}, "invalid body"},
		{"body over 1 MiB via @", []string{"enqueue", "--url", u, "--data", "@" + big}, "invalid body"},
		{"max-attempts 0", []string{"enqueue", "--url", u, "--max-attempts", "0"}, "invalid max-attempts"},
		{"max-attempts 1000", []string{"enqueue", "--url", u, "--max-attempts", "1000"}, "invalid max-attempts"},
		{"negative deadline", []string{"enqueue", "--url", u, "--deadline", "-1s"}, "invalid deadline"},
		{"zero deadline", []string{"enqueue", "--url", u, "--deadline", "0s"}, "invalid deadline"},
		{"zero attempt-timeout", []string{"enqueue", "--url", u, "--attempt-timeout", "0s"}, "invalid attempt-timeout"},
		{"negative key-ttl", []string{"enqueue", "--url", u, "--key-ttl", "-5m"}, "invalid key-ttl"},
		{"ftp status-url", []string{"enqueue", "--url", u, "--status-url", "ftp://x/{key}"}, "invalid status-url"},
		{"status-url without placeholder", []string{"enqueue", "--url", u, "--status-url", "http://h/status"}, "invalid status-url"},
		{"list unknown state", []string{"list", "--state", "nope"}, "--state"},
		{"list limit 0", []string{"list", "--limit", "0"}, "invalid limit"},
		{"header value not UTF-8", []string{"enqueue", "--url", u, "-H", "X-Name: caf\xe9"}, "not valid UTF-8"},
		{"url not UTF-8", []string{"enqueue", "--url", "http://127.0.0.1:9/caf\xe9"}, "valid UTF-8"},
		{"status-url not UTF-8", []string{"enqueue", "--url", u, "--status-url", "http://127.0.0.1:9/s/{key}/caf\xe9"}, "valid UTF-8"},
		{"deadline not a duration", []string{"enqueue", "--url", u, "--deadline", "banana"}, `invalid deadline "banana": accepted: a duration`},
		{"max-attempts not a number", []string{"enqueue", "--url", u, "--max-attempts", "five"}, `invalid max-attempts "five": accepted: an integer`},
		{"no-effect-status not numbers", []string{"enqueue", "--url", u, "--no-effect-status", "abc"}, `invalid no-effect-status "abc": accepted: integers`},
		{"list oldest without state", []string{"list", "--oldest"}, "invalid oldest"},
		{"list json and json-page", []string{"list", "--json", "--json-page"}, "not both"},
		{"from with max-attempts", []string{"enqueue", "--from", "-", "--max-attempts", "9"}, "--max-attempts cannot be combined with --from"},
		{"from with key", []string{"enqueue", "--from", "-", "--key", "KK"}, "--key cannot be combined with --from"},
		{"from with url", []string{"enqueue", "--from", "-", "--url", u}, "--url cannot be combined with --from"},
		{"run status-budget 0", []string{"run", "--status-budget", "0"}, "invalid status-budget"},
		{"run backoff cap below its base", []string{"run", "--backoff-base", "1s", "--backoff-cap", "1ms"}, "invalid backoff-cap"},
		{"run backoff base above the default cap", []string{"run", "--backoff-base", "1m"}, "at least --backoff-base (1m0s)"},
		{"run status-budget negative", []string{"run", "--status-budget", "-5"}, "invalid status-budget"},
		{"run lease-ttl 0", []string{"run", "--lease-ttl", "0s"}, "invalid lease-ttl 0s: accepted: a positive duration up to 24h"},
		{"run token file without admin", []string{"run", "--admin-token-file", "tok"}, "--admin-token-file"},
		{"watch extra argument", []string{"watch", "--count", "1", "extra"}, "unexpected argument"},
		{"unknown flag", []string{"stats", "--nope"}, "nope"},
	}
	before := e.dbState(e.db)
	// Control: a body of exactly 1 MiB is accepted (against a scratch file).
	scratch := filepath.Join(e.dir, "scratch.db")
	e.ok("enqueue", "--db", scratch, "--url", u, "--data-file", exact)

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			fresh := filepath.Join(e.dir, "fresh-"+strconv.Itoa(int(sha256.Sum256([]byte(tc.name))[0]))+".db")
			for _, db := range []string{e.db, fresh} {
				r := e.run(append(tc.args, "--db", db)...)
				if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("got\n%s\nwant exit 2 and a message containing %q", r, tc.want)
				}
				if r.stdout != "" {
					t.Errorf("refused command printed to stdout: %q", r.stdout)
				}
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Errorf("refused command created %s (stat err %v)", fresh, err)
			}
			if after := e.dbState(e.db); after != before {
				t.Errorf("database changed by a refused command:\n got stats %s list %s\nwant stats %s list %s", after.stats, after.list, before.stats, before.list)
			}
		})
	}
	// The user:password case must not echo the password either.
	r := e.run("enqueue", "--url", "http://user:pa55word@h/x")
	mustNotContain(t, "refusal of a URL with credentials", r.stdout+r.stderr, "pa55word")
}

// --db that is not an idemrun database: a directory, a text file, random
// bytes. Refused with exit 2, the message names the path, nothing changed.
func TestCLIBadDatabasePath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := filepath.Join(e.dir, "adir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(e.dir, "notes.txt")
	large := filepath.Join(e.dir, "large.txt")
	random := filepath.Join(e.dir, "random.bin")
	files := map[string][]byte{
		small:  []byte("hello, this is not a database\n"),
		large:  []byte(strings.Repeat("line of plain text, not bbolt\n", 3000)),
		random: []byte(strings.Repeat("\x8f\x01\xfe\x00\x42", 20000)),
	}
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{dir, small, large, random} {
		for _, args := range [][]string{
			{"enqueue", "--url", "http://127.0.0.1:9/x"},
			{"list"}, {"stats", "--json"}, {"show", "x"}, {"cancel", "x"},
		} {
			r := e.run(append(args, "--db", db)...)
			if r.code != 2 || !strings.Contains(r.stderr, "not an idemrun database") || !strings.Contains(r.stderr, filepath.Base(db)) {
				t.Errorf("--db %s: got\n%s\nwant exit 2 naming the path as not an idemrun database", filepath.Base(db), r)
			}
		}
	}
	for p, want := range files {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s changed by refused commands (err %v, %d bytes, want %d)", filepath.Base(p), err, len(got), len(want))
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Errorf("directory given as --db: got %d entries (err %v), want it left empty", len(ents), err)
	}
	if r := e.run("check", small); r.code == 0 {
		t.Errorf("check of a text file: got\n%s\nwant a failure", r)
	}
}

// A database held by another process (a runner without its socket): the
// CLI fails within 5 s with exit 2 (a locked path is bad input, nothing is
// written) and names the lock holder's pid.
func TestCLILockedDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/x", "--max-attempts", "1")
	p := e.startRunner("--no-socket", "--db", e.db)
	defer func() {
		if code := p.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("runner exit after SIGTERM: got %d, want 0\n%s", code, p.logs)
		}
	}()
	pid := fmt.Sprintf("pid %d", p.pid())
	for _, args := range [][]string{
		{"stats", "--json"},
		{"list"},
		{"enqueue", "--url", "http://127.0.0.1:9/y"},
		{"show", "no-such-key"},
		{"cancel", "no-such-key"},
		{"backup", filepath.Join(e.dir, "copy.db")},
	} {
		r := e.run(args...)
		if r.code != 2 || !strings.Contains(r.stderr, "locked") || !strings.Contains(r.stderr, pid) {
			t.Errorf("%v on a locked file: got\n%s\nwant exit 2 saying locked and naming %s", args, r, pid)
		}
		if r.took > 5*time.Second {
			t.Errorf("%v on a locked file took %s, want at most 5s", args, r.took)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "copy.db")); !os.IsNotExist(err) {
		t.Errorf("backup on a locked file left copy.db (stat err %v)", err)
	}
}

const (
	plantedBearer = "s3cr3t-planted"
	plantedAPIKey = "planted-key-123"
	plantedURLTok = "planted-url-tok-789"
)

var plantedSecrets = []string{plantedBearer, plantedAPIKey, plantedURLTok}

// Sensitive headers and credential URL parameters are stored and sent, but
// never printed: not by enqueue, list or show (plain or --json), not in the
// runner's debug logs, not even when the target echoes them back.
func TestCLISecretsNeverShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		echo := fmt.Sprintf(`{"echo":%q,"key":%q,"tok":%q}`, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.URL.Query().Get("access_token"))
		switch r.URL.Path {
		case "/reject":
			w.WriteHeader(400)
		default:
			w.WriteHeader(200)
		}
		fmt.Fprint(w, echo)
	})
	secretHeaders := []string{"-H", "Authorization: Bearer " + plantedBearer, "-H", "X-Api-Key: " + plantedAPIKey}
	var outputs []result
	enq := func(args ...string) map[string]any {
		r := e.ok(append(append([]string{"enqueue"}, secretHeaders...), args...)...)
		outputs = append(outputs, r)
		if strings.Contains(strings.Join(args, " "), "--json") {
			return jsonObject(t, r)
		}
		return nil
	}
	enq("--url", tg.url("/ok"), "--key", "secret-ok", "--data", "a")
	okJob := enq("--url", tg.url("/ok"), "--key", "secret-ok", "--data", "a", "--json")
	if okJob["existing"] != true {
		t.Errorf("repeat enqueue: existing = %v, want true", okJob["existing"])
	}
	rejJob := enq("--url", tg.url("/reject"), "--key", "secret-reject", "--json")
	urlJob := enq("--url", tg.url("/ok")+"?access_token="+plantedURLTok+"&n=1", "--key", "secret-url", "--json")
	// A key conflict (different body) names the job but no credential.
	conflict := e.run(append(append([]string{"enqueue"}, secretHeaders...), "--url", tg.url("/ok"), "--key", "secret-ok", "--data", "b")...)
	if conflict.code != 1 || !strings.Contains(conflict.stderr, okJob["id"].(string)) {
		t.Errorf("key conflict with credentials: got\n%s\nwant exit 1 naming %v", conflict, okJob["id"])
	}
	// Credentials are not part of the request's identity (idemkey
	// fingerprint): a rotated one finds the existing job.
	rotated := e.run("enqueue", "--url", tg.url("/ok"), "--key", "secret-ok", "--data", "a", "--json",
		"-H", "Authorization: Bearer "+plantedBearer+"-rotated", "-H", "X-Api-Key: "+plantedAPIKey)
	if rotated.code != 0 || jsonObject(t, rotated)["existing"] != true {
		t.Errorf("enqueue with a rotated credential: got\n%s\nwant the existing job", rotated)
	}
	outputs = append(outputs, conflict, rotated)
	headers, _ := okJob["headers"].([]any)
	if len(headers) != 2 || !strings.Contains(fmt.Sprint(headers), "REDACTED") {
		t.Errorf("enqueue --json headers: got %v, want both present and redacted", headers)
	}

	inspect := func(phase string) {
		t.Helper()
		rs := []result{e.ok("list"), e.ok("list", "--json")}
		for _, j := range []map[string]any{okJob, rejJob, urlJob} {
			id := j["id"].(string)
			rs = append(rs, e.ok("show", id), e.ok("show", id, "--json"), e.ok("show", j["key"].(string)))
		}
		for _, r := range rs {
			mustNotContain(t, phase+" "+strings.Join(r.args, " "), r.stdout+r.stderr, plantedSecrets...)
		}
		sh := e.ok("show", okJob["id"].(string))
		if !strings.Contains(sh.stdout, "Authorization: Bearer REDACTED") || !strings.Contains(sh.stdout, "X-Api-Key: REDACTED") {
			t.Errorf("%s show: got\n%s\nwant both sensitive headers listed as REDACTED", phase, sh.stdout)
		}
	}
	for _, r := range outputs {
		mustNotContain(t, "enqueue "+strings.Join(r.args, " "), r.stdout+r.stderr, plantedSecrets...)
	}
	inspect("before run")

	run := e.runProc("run", "--until-idle", "--log-level", "debug", "--startup-spread", "10ms")
	if run.code != 0 {
		t.Fatalf("run --until-idle: got\n%s\nwant exit 0", run)
	}
	mustNotContain(t, "run --until-idle --log-level debug output", run.stdout+run.stderr, plantedSecrets...)
	if !strings.Contains(run.stderr, "level=") {
		t.Errorf("runner wrote no logs at debug level:\n%s", run.stderr)
	}

	// The target did receive the real values, once per job.
	for _, path := range []string{"/ok", "/reject"} {
		for _, s := range tg.requests(path) {
			if got := s.Header.Get("Authorization"); got != "Bearer "+plantedBearer {
				t.Errorf("target %s Authorization: got %q, want %q", path, got, "Bearer "+plantedBearer)
			}
			if got := s.Header.Get("X-Api-Key"); got != plantedAPIKey {
				t.Errorf("target %s X-Api-Key: got %q, want %q", path, got, plantedAPIKey)
			}
		}
	}
	if got := len(tg.requests("/ok")); got != 2 {
		t.Errorf("target /ok requests: got %d, want 2 (secret-ok once, secret-url once)", got)
	}
	if got := len(tg.requests("/reject")); got != 1 {
		t.Errorf("target /reject requests: got %d, want 1", got)
	}
	var sawTok bool
	for _, s := range tg.requests("/ok") {
		sawTok = sawTok || strings.Contains(s.Query, plantedURLTok)
	}
	if !sawTok {
		t.Errorf("target never received the access_token URL parameter")
	}
	for _, c := range []struct {
		j     map[string]any
		state string
	}{{okJob, "succeeded"}, {rejJob, "failed"}, {urlJob, "succeeded"}} {
		if got := e.showJob(c.j["id"].(string)); got["state"] != c.state {
			t.Errorf("job %v after run: got state %v, want %s", c.j["key"], got["state"], c.state)
		}
	}
	inspect("after run")
	res, _ := e.showJob(okJob["id"].(string))["result"].(map[string]any)
	if body, _ := res["body"].(string); strings.Count(body, "REDACTED") != 2 {
		t.Errorf("result of a target echoing the secrets: got %v, want the echo kept with the secrets redacted", res)
	}
}

// Without --db and IDEMRUN_DB the database is ./idemrun.db (processes: the
// path is relative to the working directory, e.dir).
func TestCLIDefaultDBPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.db = ""
	e.okProc("enqueue", "--url", "http://127.0.0.1:9/x", "--key", "default-path")
	if _, err := os.Stat(filepath.Join(e.dir, "idemrun.db")); err != nil {
		t.Fatalf("enqueue without --db or IDEMRUN_DB: %v, want ./idemrun.db created", err)
	}
	if j := jsonObject(t, e.okProc("show", "default-path", "--json")); j["key"] != "default-path" {
		t.Errorf("show from ./idemrun.db: got %v, want the job", j)
	}
}

// enqueue --from: JSON lines in one transaction; a bad line refuses the
// whole file (exit 2, nothing written), a key conflict refuses only its job.
func TestCLIEnqueueFrom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	write := func(name string, lines ...string) string {
		p := filepath.Join(e.dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.jsonl",
		`{"url":"http://127.0.0.1:9/a","key":"from-a","data":"one","headers":{"Authorization":"Bearer `+plantedBearer+`"}}`,
		``,
		`{"URL":"http://127.0.0.1:9/b","Key":"from-b","method":"PUT","Max_Attempts":3,"deadline":"1h"}`) // names match without regard to case
	r := e.ok("enqueue", "--from", good, "--json")
	mustNotContain(t, "enqueue --from --json", r.stdout+r.stderr, plantedSecrets...)
	jobs := jsonArray(t, r)
	if len(jobs) != 2 || jobs[0]["key"] != "from-a" || jobs[1]["key"] != "from-b" || jobs[1]["method"] != "PUT" {
		t.Fatalf("enqueue --from --json: got %v, want from-a and from-b (PUT) in order", jobs)
	}
	for i, j := range jobs {
		checkJobShape(t, fmt.Sprintf("enqueue --from --json [%d]", i), j)
	}
	before := e.dbState(e.db)
	bad := write("bad.jsonl",
		`{"url":"http://127.0.0.1:9/c","key":"from-c"}`,
		`{"url":"ftp://nope","key":"from-d"}`)
	if r := e.run("enqueue", "--from", bad); r.code != 2 || !strings.Contains(r.stderr, "line 2") || !strings.Contains(r.stderr, "url") {
		t.Errorf("enqueue --from with a bad line 2: got\n%s\nwant exit 2 naming line 2 and the url", r)
	}
	unknown := write("unknown.jsonl", `{"url":"http://127.0.0.1:9/c","colour":"red"}`)
	if r := e.run("enqueue", "--from", unknown); r.code != 2 || !strings.Contains(r.stderr, "line 1") || !strings.Contains(r.stderr, "colour") {
		t.Errorf("enqueue --from with an unknown field: got\n%s\nwant exit 2 naming line 1 and the field", r)
	}
	// A value of the wrong shape: the error names the line, the field and
	// the value, and says what the field takes.
	for _, c := range []struct{ line, field, value, accepted string }{
		{`{"url":"http://127.0.0.1:9/c","deadline":"banana"}`, "deadline", "banana", "duration"},
		{`{"url":"http://127.0.0.1:9/c","max_attempts":"5"}`, "max_attempts", `5`, "integer"},
		{`{"url":"http://127.0.0.1:9/c","key_format":"bogus"}`, "key_format", "bogus", "structured"},
		{`{"url":"http://127.0.0.1:9/c","no_effect_statuses":503}`, "no_effect_statuses", "503", "array"},
		{`["not","an","object"]`, "line 1", "not", "JSON object"},
		{`{"url":"http://127.0.0.1:9/c","Key":"a","KEY":"b"}`, "line 1", "KEY", "each field once"},
	} {
		f := write("shape.jsonl", c.line)
		r := e.run("enqueue", "--from", f)
		for _, want := range []string{"line 1", c.field, c.value, c.accepted} {
			if r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("enqueue --from %s: got\n%s\nwant exit 2 and a message containing %q", c.line, r, want)
			}
		}
	}
	if after := e.dbState(e.db); after != before {
		t.Errorf("refused --from changed the database:\n got %s\nwant %s", after.stats, before.stats)
	}
	conflict := write("conflict.jsonl",
		``,
		`{"url":"http://127.0.0.1:9/a","key":"from-a","data":"two"}`,
		`{"url":"http://127.0.0.1:9/e","key":"from-e","key_format":"structured","no_effect_statuses":[503]}`)
	r = e.run("enqueue", "--from", conflict)
	if r.code != 1 || !strings.Contains(r.stderr, jobs[0]["id"].(string)) || !strings.Contains(r.stderr, "--from line 2:") {
		t.Errorf("enqueue --from with a key conflict on line 2: got\n%s\nwant exit 1 naming line 2 and job %v", r, jobs[0]["id"])
	}
	if j := e.showJob("from-e"); j["state"] != "pending" {
		t.Errorf("the valid job beside a conflict: got %v, want it stored pending", j)
	}
	if st := e.statsOf(); st["pending"] != 3 {
		t.Errorf("stats after --from runs: got %v, want pending=3", st)
	}
}

// idemrun with no arguments is a usage error: usage on stderr, exit 2,
// like an unknown command; `idemrun help` prints it on stdout, exit 0.
func TestNoArgumentsIsAUsageError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.run(); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "usage:") {
		t.Errorf("idemrun: got\n%s\nwant exit 2, usage on stderr only", r)
	}
	if r := e.run("help"); r.code != 0 || !strings.Contains(r.stdout, "usage:") {
		t.Errorf("idemrun help: got\n%s\nwant exit 0, usage on stdout", r)
	}
}

// A runner that stopped on a write whose commit was not confirmed exits
// 1: exit 3 is an enqueue's unknown outcome.
func TestReportStoppedRunner(t *testing.T) {
	var stderr strings.Builder
	m := &Main{Stderr: &stderr}
	err := &stoppedError{fmt.Errorf("runner: lease: %w", store.ErrCommitUnknown)}
	if code := m.report(err); code != exitFailure {
		t.Errorf("report = %d, want %d (%s)", code, exitFailure, stderr.String())
	}
	if code := m.report(fmt.Errorf("enqueue: %w", store.ErrCommitUnknown)); code != exitUnknown {
		t.Errorf("an enqueue's unknown commit: report = %d, want %d", code, exitUnknown)
	}
}
