package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
