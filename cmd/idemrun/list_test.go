package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
)

// nextArgs turns the "more: idemrun list ..." line a page prints into the
// arguments of the command it names.
func nextArgs(t *testing.T, out, prefix string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix+"idemrun "); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// Every order and filter of list pages through all its jobs, each exactly
// once, by running the command the previous page printed; --json-page
// carries the cursor on stdout; a state named twice is listed once.
func TestCLIListPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 7
	var ids []string
	for i := range n {
		r := e.ok("enqueue", "--url", "http://127.0.0.1:9/p", "--key", fmt.Sprintf("page-%d", i), "--json")
		ids = append(ids, jsonObject(t, r)["id"].(string))
	}
	e.ok("cancel", ids[0]) // one job in a second state

	for _, first := range [][]string{
		{"list", "--limit", "2"},
		{"list", "--state", "pending", "--limit", "2"},
		{"list", "--state", "canceled", "--state", "pending", "--limit", "3"},
		{"list", "--state", "pending", "--oldest", "--limit", "2"},
		{"list", "--state", "pending,canceled", "--oldest", "--limit", "1"},
	} {
		t.Run(strings.Join(first, " "), func(t *testing.T) {
			e := e.with(t)
			seen := map[string]int{}
			// The next-page command is run as printed: it keeps --json.
			args := append(append([]string(nil), first...), "--json")
			for pages := 0; args != nil; pages++ {
				if pages > n {
					t.Fatalf("more than %d pages: the cursor does not advance (last %v)", n, args)
				}
				r := e.ok(args...)
				for _, j := range jsonArray(t, r) {
					seen[j["id"].(string)]++
				}
				args = nextArgs(t, r.stderr, "next: ")
				if args != nil && (!strings.Contains(r.stderr, "--limit") || !strings.Contains(r.stderr, "--cursor") || !strings.Contains(r.stderr, "--json")) {
					t.Errorf("next-page command %q lost the page size, the cursor or --json", r.stderr)
				}
			}
			want := n
			if strings.Contains(strings.Join(first, " "), "pending") && !strings.Contains(strings.Join(first, " "), "canceled") {
				want = n - 1
			}
			if len(seen) != want {
				t.Errorf("pages listed %d distinct jobs, want %d: %v", len(seen), want, seen)
			}
			for id, c := range seen {
				if c != 1 {
					t.Errorf("job %s listed %d times, want once", id, c)
				}
			}
		})
	}

	// The table form prints the same next command on stdout.
	r := e.ok("list", "--state", "pending", "--oldest", "--limit", "4")
	args := nextArgs(t, r.stdout, "more: ")
	if want := []string{"list", "--state", "pending", "--oldest", "--limit", "4", "--cursor"}; len(args) != len(want)+1 || strings.Join(args[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("more line: got %q, want it to repeat %v and give the cursor", args, want)
	}
	r = e.ok(args...)
	if got := strings.Count(r.stdout, "\n") - 1; got != 2 || strings.Contains(r.stdout, "more:") {
		t.Errorf("second oldest page: got %d rows\n%s\nwant the last 2 pending jobs and no more line", got, r.stdout)
	}

	// --json-page: the page object with its cursor on stdout.
	r = e.ok("list", "--state", "pending", "--limit", "5", "--json-page")
	var page struct {
		Jobs []map[string]any `json:"jobs"`
		Next string           `json:"next"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Jobs) != 5 || page.Next == "" {
		t.Fatalf("list --json-page: got %v / %q (%v), want 5 jobs and a next cursor", len(page.Jobs), page.Next, err)
	}
	r = e.ok("list", "--state", "pending", "--limit", "5", "--cursor", page.Next, "--json-page")
	var last map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &last); err != nil || len(last["jobs"].([]any)) != 1 || last["next"] != nil {
		t.Errorf("last --json-page: got %s, want 1 job and no next", r.stdout)
	}

	// A state named twice lists each job once.
	if got := jsonArray(t, e.ok("list", "--state", "pending,pending", "--state", "pending", "--json")); len(got) != n-1 {
		t.Errorf("list --state pending three times: got %d jobs, want %d", len(got), n-1)
	}
}

// A job left running by a runner that is gone (killed mid-attempt) says
// so in list and show: with the file opened directly, no runner holds a
// lease, so nobody is working it.
func TestListShowRunnerGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "gone-1")
	c, err := api.Open(e.db, &api.Options{Direct: true, Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	// killed-runner holds a lease in this handle, claims, and is gone
	// when the handle closes, as a killed runner process is.
	if err := c.Store().Register(context.Background(), store.RunnerInfo{ID: "killed-runner", Workers: 1}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	claims, err := c.Store().ClaimDue(context.Background(), store.ClaimRequest{State: store.StatePending, Now: time.Now().Add(time.Second), Limit: 1, Owner: "killed-runner"})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := e.ok("list"); !strings.Contains(r.stdout, "running, runner gone (killed-r…)") {
		t.Errorf("list of a job whose runner is gone:\n%s\nwant its state as running, runner gone, and the runner", r)
	}
	r := e.ok("show", "gone-1")
	if !strings.Contains(r.stdout, "running, runner gone") || !strings.Contains(r.stdout, "killed-runner, gone") {
		t.Errorf("show of a job whose runner is gone:\n%s\nwant its state and runner to say so", r)
	}
	j := jsonObject(t, e.ok("show", "gone-1", "--json"))
	if j["state"] != "running" || j["owner"] != "killed-runner" || j["lease"] != "expired" {
		t.Errorf("show --json: state %v owner %v lease %v, want running, killed-runner, expired", j["state"], j["owner"], j["lease"])
	}
}

// On a shared database a running job's runner may be alive: list names
// it and says its lease is alive, show gives its whole id.
func TestListShowLiveRunner(t *testing.T) {
	e := pgEnv(t)
	e.ok("migrate")
	e.ok("enqueue", "--url", "http://127.0.0.1:9/a", "--key", "live-1")
	c, err := api.Open(e.db, &api.Options{Direct: true, Warn: io.Discard, Postgres: &postgres.Options{Schema: e.schema}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// The lease outlives the handle: it is a row in the database.
	if err := c.Store().Register(ctx, store.RunnerInfo{ID: "node-a-7f3e", Workers: 1}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	defer c.Store().Deregister(ctx, "node-a-7f3e")
	claims, err := c.Store().ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: time.Now().Add(time.Second), Limit: 1, Owner: "node-a-7f3e"})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	if r := e.ok("list"); !strings.Contains(r.stdout, "running on node-a-7…, lease alive") {
		t.Errorf("list of a job a live runner works:\n%s\nwant its runner and a live lease", r)
	}
	if r := e.ok("show", "live-1"); !strings.Contains(r.stdout, "node-a-7f3e (lease alive)") {
		t.Errorf("show of a job a live runner works:\n%s\nwant its runner's id and a live lease", r)
	}
}
