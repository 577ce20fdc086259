package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// switchTarget answers 400 (a permanent refusal: the job fails) until
// healed, then 201, and counts the creates it took by idempotency key.
type switchTarget struct {
	*target
	healed  atomic.Bool
	mu      sync.Mutex
	created map[string]int
}

func newSwitchTarget(t *testing.T) *switchTarget {
	st := &switchTarget{created: map[string]int{}}
	st.target = newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if !st.healed.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		st.mu.Lock()
		st.created[r.Header.Get("Idempotency-Key")]++
		st.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	return st
}

// host is the target's host as --host takes it.
func (st *switchTarget) host(t *testing.T) string {
	u, err := url.Parse(st.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// creates is how many creates the target took under each key.
func (st *switchTarget) creates() map[string]int {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := map[string]int{}
	for k, n := range st.created {
		out[k] = n
	}
	return out
}

// bulkResult is retry/cancel/resolve --all --json.
type bulkResult struct {
	Matched   int `json:"matched"`
	Changed   int `json:"changed"`
	Unchanged []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	} `json:"unchanged"`
	UnchangedCount int `json:"unchanged_count"`
}

func parseBulk(t *testing.T, r result) bulkResult {
	t.Helper()
	var b bulkResult
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
		t.Fatalf("not a bulk result (%v):\n%s", err, r)
	}
	return b
}

// A bulk retry of the failed jobs of one host, on a bbolt file and on
// Postgres: --dry-run prints the count and changes nothing; the retry
// changes exactly those jobs, the runner sends them again, and the
// target holds one create per job; the other host's failed jobs stay
// failed.
func TestCLIBulkRetryByHost(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"bolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if backend == "postgres" {
				e = pgEnv(t)
				e.ok("migrate")
			}
			a, b := newSwitchTarget(t), newSwitchTarget(t)
			for i := range 4 {
				e.ok("enqueue", "--url", a.url("/pay"), "--key", fmt.Sprintf("a-%d", i))
			}
			for i := range 2 {
				e.ok("enqueue", "--url", b.url("/pay"), "--key", fmt.Sprintf("b-%d", i))
			}
			e.okProc("run", "--until-idle", "--startup-spread", "1ms")
			if st := e.statsOf(); st["failed"] != 6 {
				t.Fatalf("after the first run: %v; want 6 failed", st)
			}
			a.healed.Store(true)
			b.healed.Store(true)

			before := e.ok("list", "--json").stdout
			dry := e.ok("retry", "--all", "--state", "failed", "--host", a.host(t), "--note", "a is back", "--dry-run")
			if !strings.Contains(dry.stdout, "4 jobs match; nothing changed") {
				t.Errorf("retry --dry-run printed %q; want the count of 4 and nothing changed", dry.stdout)
			}
			if after := e.ok("list", "--json").stdout; after != before {
				t.Errorf("retry --dry-run changed the jobs")
			}
			if got := parseBulk(t, e.ok("retry", "--all", "--state", "failed", "--host", a.host(t), "--note", "a is back", "--dry-run", "--json")); got.Matched != 4 || got.Changed != 0 {
				t.Errorf("retry --dry-run --json = %+v; want 4 matched, 0 changed", got)
			}

			res := parseBulk(t, e.ok("retry", "--all", "--state", "failed", "--host", a.host(t), "--since", "1h", "--note", "a is back", "--json"))
			if res.Matched != 4 || res.Changed != 4 || res.UnchangedCount != 0 {
				t.Fatalf("retry --all = %+v; want 4 of 4 changed", res)
			}
			if st := e.statsOf(); st["pending"] != 4 || st["failed"] != 2 {
				t.Fatalf("after the bulk retry: %v; want 4 pending, 2 failed", st)
			}
			e.okProc("run", "--until-idle", "--startup-spread", "1ms")
			if st := e.statsOf(); st["succeeded"] != 4 || st["failed"] != 2 {
				t.Errorf("after the second run: %v; want 4 succeeded, 2 failed", st)
			}
			got := a.creates()
			for i := range 4 {
				if n := got[fmt.Sprintf("a-%d", i)]; n != 1 {
					t.Errorf("target a holds %d creates of a-%d; want 1", n, i)
				}
			}
			if len(got) != 4 {
				t.Errorf("target a holds creates under %d keys (%v); want 4", len(got), got)
			}
			if n := len(b.creates()); n != 0 {
				t.Errorf("target b took %d creates; want none (its jobs were not retried)", n)
			}
			j := e.showJob("a-0")
			hist, _ := j["history"].([]any)
			found := false
			for _, h := range hist {
				ev, _ := h.(map[string]any)
				found = found || (ev["kind"] == "manual" && ev["note"] == "a is back" && ev["actor"] == "e2e-test")
			}
			if !found {
				t.Errorf("job a-0 history has no manual retry with the note: %v", hist)
			}

			// A second retry finds nothing left to do.
			if r := e.ok("retry", "--all", "--state", "failed", "--host", a.host(t), "--note", "again"); !strings.Contains(r.stdout, "0 of 0 matched jobs changed") {
				t.Errorf("a second retry printed %q; want 0 of 0", r.stdout)
			}
		})
	}
}

// Through the admin socket of a runner holding the file, a bulk retry
// changes the failed jobs and the runner sends them again; a bulk
// cancel of pending jobs reports the ones it could not cancel.
func TestCLIBulkThroughRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := newSwitchTarget(t)
	p := e.startRunner("--startup-spread", "1ms", "--poll-interval", "50ms")
	for i := range 3 {
		e.ok("enqueue", "--url", tg.url("/pay"), "--key", fmt.Sprintf("r-%d", i))
	}
	for i := range 3 {
		e.waitState(fmt.Sprintf("r-%d", i), "failed", 15*time.Second)
	}
	tg.healed.Store(true)
	res := parseBulk(t, e.ok("retry", "--all", "--state", "failed", "--note", "healed", "--json"))
	if res.Matched != 3 || res.Changed != 3 {
		t.Fatalf("retry --all through the runner = %+v; want 3 of 3", res)
	}
	for i := range 3 {
		e.waitState(fmt.Sprintf("r-%d", i), "succeeded", 15*time.Second)
	}
	for k, n := range tg.creates() {
		if n != 1 {
			t.Errorf("target holds %d creates of %s; want 1", n, k)
		}
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("runner exited %d", code)
	}
}

// resolve --all resolves the needs_attention jobs as the state given and
// records the note on each; cancel --all cancels pending jobs.
func TestCLIBulkResolveAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// 504 after the request was sent: the outcome is unknown, and with
	// no status URL nobody can find out: needs_attention.
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGatewayTimeout) })
	for i := range 3 {
		e.ok("enqueue", "--url", tg.url("/pay"), "--key", fmt.Sprintf("n-%d", i), "--max-attempts", "1")
	}
	e.okProc("run", "--until-idle", "--startup-spread", "1ms")
	if st := e.statsOf(); st["needs_attention"] != 3 {
		t.Fatalf("after the run: %v; want 3 needs_attention", st)
	}
	r := e.ok("resolve", "--all", "--state", "needs_attention", "--key-prefix", "n-", "--as", "failed", "--note", "not at the provider")
	if !strings.Contains(r.stdout, "resolve: 3 of 3 matched jobs changed") {
		t.Errorf("resolve --all printed %q", r.stdout)
	}
	for i := range 3 {
		j := e.showJob(fmt.Sprintf("n-%d", i))
		if j["state"] != "failed" || !strings.Contains(fmt.Sprint(j["reason"]), "not at the provider") {
			t.Errorf("job n-%d: state %v, reason %v; want failed with the note", i, j["state"], j["reason"])
		}
	}
	for i := range 2 {
		e.ok("enqueue", "--url", "http://127.0.0.1:9/x", "--key", fmt.Sprintf("c-%d", i), "--run-at", "1m")
	}
	if res := parseBulk(t, e.ok("cancel", "--all", "--state", "pending", "--note", "not needed", "--json")); res.Matched != 2 || res.Changed != 2 {
		t.Errorf("cancel --all = %+v; want 2 of 2", res)
	}
	if st := e.statsOf(); st["canceled"] != 2 || st["failed"] != 3 {
		t.Errorf("after cancel --all: %v; want 2 canceled, 3 failed", st)
	}
}

// Bad input to the bulk actions exits 2, names the value and what is
// accepted, and changes nothing.
func TestCLIBulkRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.ok("enqueue", "--url", "http://127.0.0.1:9/x", "--key", "p-1", "--json")
	id := jsonObject(t, r)["id"].(string)
	before := e.ok("list", "--json").stdout
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"cancel", "--all", "--state", "bogus", "--note", "n"}, []string{`"bogus"`, "accepted: pending, running"}},
		{[]string{"cancel", "--all", id, "--state", "pending", "--note", "n"}, []string{id, "--all", "not on a job id"}},
		{[]string{"cancel", "--all", "--note", "n"}, []string{"--state", "--state pending"}},
		{[]string{"cancel", "--all", "--state", "failed", "--note", "n"}, []string{`--state "failed"`, "accepted: pending"}},
		{[]string{"cancel", "--all", "--state", "pending"}, []string{"--note", "non-empty note"}},
		{[]string{"cancel", "--all", "--state", "pending", "--note", "  "}, []string{"--note"}},
		{[]string{"cancel", "--all", "--state", "pending", "--note", "n", "--since", "1m", "--until", "2h"}, []string{"--until", "after since"}},
		{[]string{"cancel", "--all", "--state", "pending", "--note", "n", "--since", "yesterday"}, []string{`--since "yesterday"`, "RFC 3339"}},
		{[]string{"cancel", "--all", "--state", "pending", "--note", "n", "--until", "+1h"}, []string{`--until "+1h"`, "how long ago"}},
		{[]string{"cancel", "--all", "--state", "pending", "--note", "n", "--host", "http://127.0.0.1:9/"}, []string{"--host", "without scheme"}},
		{[]string{"cancel", "--all", "--state", "pending", "--note", "n", "--id-prefix", "xyz"}, []string{`--id-prefix "xyz"`, "hex digits"}},
		{[]string{"cancel", "--state", "pending", "--note", "n"}, []string{"--state needs --all"}},
		{[]string{"cancel", "--dry-run", id}, []string{"--dry-run needs --all"}},
		{[]string{"retry", "--all", "--state", "pending", "--note", "n"}, []string{`--state "pending"`, "accepted: failed"}},
		{[]string{"resolve", "--all", "--state", "needs_attention", "--note", "n"}, []string{"as", "succeeded or failed"}},
		{[]string{"resolve", "--all", "--state", "needs_attention", "--as", "pending", "--note", "n"}, []string{`"pending"`, "succeeded or failed"}},
		{[]string{"resolve", "--all", "--state", "needs_attention", "--as", "failed"}, []string{"--note"}},
	} {
		r := e.run(c.args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d; want %d\n%s", c.args, r.code, exitUsage, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, r.stderr, w)
			}
		}
	}
	if after := e.ok("list", "--json").stdout; after != before {
		t.Errorf("a refused bulk action changed the jobs")
	}
}

// list's filters: --host, --since/--until (RFC 3339 or how long ago),
// --key-prefix, --id-prefix and --sort; the next-page command carries
// them, with the times as they were read; bad input exits 2.
func TestCLIListFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for i := range 5 {
		r := e.ok("enqueue", "--url", "http://127.0.0.1:9/x", "--key", fmt.Sprintf("lf-a-%d", i), "--json")
		ids = append(ids, jsonObject(t, r)["id"].(string))
	}
	for i := range 3 {
		e.ok("enqueue", "--url", "https://API.example.com/x", "--key", fmt.Sprintf("lf-b-%d", i))
	}
	e.ok("cancel", ids[0])
	count := func(args ...string) int {
		t.Helper()
		return len(jsonArray(t, e.ok(append([]string{"list", "--json"}, args...)...)))
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--host", "127.0.0.1:9"}, 5},
		{[]string{"--host", "api.example.com"}, 3},
		{[]string{"--host", "API.example.com"}, 3},
		{[]string{"--host", "api.example.com:443"}, 0},
		{[]string{"--host", "127.0.0.1:9", "--state", "pending"}, 4},
		{[]string{"--since", "1h"}, 8},
		{[]string{"--since", "-1h", "--state", "canceled"}, 1},
		{[]string{"--until", "1h"}, 0},
		{[]string{"--since", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 8},
		{[]string{"--key-prefix", "lf-b-"}, 3},
		{[]string{"--id-prefix", ids[2]}, 1},
		{[]string{"--state", "pending", "--sort", "next_run"}, 7},
		{[]string{"--state", "canceled", "--sort", "updated"}, 1},
	} {
		if got := count(c.args...); got != c.want {
			t.Errorf("list %v: %d jobs; want %d", c.args, got, c.want)
		}
	}
	// Pages of a filtered list, by the command each prints.
	args := []string{"list", "--host", "127.0.0.1:9", "--since", "1h", "--key-prefix", "lf-a-", "--limit", "2"}
	seen := map[string]bool{}
	for pages := 0; args != nil; pages++ {
		if pages > 5 {
			t.Fatalf("still paging: %v", args)
		}
		r := e.ok(args...)
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && len(f[0]) == 36 {
				seen[f[0]] = true
			}
		}
		args = nextArgs(t, r.stdout, "more: ")
		if args != nil && (!strings.Contains(strings.Join(args, " "), "--host 127.0.0.1:9") || !strings.Contains(strings.Join(args, " "), "--key-prefix lf-a-") || strings.Contains(strings.Join(args, " "), "--since 1h")) {
			t.Errorf("next-page command %v lost a filter, or kept --since relative", args)
		}
	}
	if len(seen) != 5 {
		t.Errorf("pages of the filtered list showed %d jobs; want 5", len(seen))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--since", "soon"}, `--since "soon"`},
		{[]string{"list", "--since", "1m", "--until", "1h"}, "--until"},
		{[]string{"list", "--host", "a b"}, "--host"},
		{[]string{"list", "--sort", "random"}, `--sort "random"`},
		{[]string{"list", "--sort", "next_run", "--state", "failed"}, `--sort "next_run"`},
		{[]string{"list", "--sort", "updated"}, `--sort "updated"`},
		{[]string{"list", "--state", "pending", "--sort", "next_run", "--oldest"}, "--sort"},
	} {
		r := e.run(c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
}

// A bulk cancel killed with SIGKILL has changed whole batches of 500
// jobs or none of a batch (each is one transaction); run again, it
// cancels the rest, and no job holds more than one cancel.
func TestCLIBulkKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 5000
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"url":"http://127.0.0.1:9/x","key":"kill-%05d","run_at":"10m"}`+"\n", i)
	}
	if r := e.runStdin([]byte(lines.String()), "enqueue", "--from", "-"); r.code != 0 {
		t.Fatalf("enqueue --from:\n%s", r)
	}
	for _, after := range []time.Duration{30 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond} {
		cmd := exec.Command(binPath, "cancel", "--all", "--state", "pending", "--note", "killed run")
		cmd.Dir, cmd.Env = e.dir, e.environ()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		st := e.statsOf()
		t.Logf("SIGKILL after %s: %d canceled", after, st["canceled"])
		if st["canceled"]%500 != 0 || st["canceled"]+st["pending"] != n {
			t.Fatalf("after a SIGKILL at %s: %v; want whole batches of 500 canceled, the rest pending", after, st)
		}
	}
	res := parseBulk(t, e.ok("cancel", "--all", "--state", "pending", "--note", "the rest", "--json"))
	if st := e.statsOf(); st["canceled"] != n || res.Changed != res.Matched {
		t.Fatalf("after the last run: %v (result %+v); want all %d canceled", st, res, n)
	}
	for _, k := range []string{"kill-00000", "kill-02500", "kill-04999"} {
		hist, _ := e.showJob(k)["history"].([]any)
		manual := 0
		for _, h := range hist {
			if ev, _ := h.(map[string]any); ev["kind"] == "manual" {
				manual++
			}
		}
		if manual != 1 {
			t.Errorf("job %s has %d manual events; want 1 cancel", k, manual)
		}
	}
}
