package demo

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/idemrun/idemrun/store"
)

// Summary is what a run found, checked at the target.
type Summary struct {
	Jobs         int            `json:"jobs"`
	ByState      map[string]int `json:"by_state"`
	Creates      int            `json:"creates_at_server"`
	Duplicates   []string       `json:"duplicate_keys"`
	Lost         []string       `json:"lost_keys"`
	Violations   []string       `json:"violations"`
	Kills        int            `json:"kills"`
	Starts       int            `json:"runner_starts"`
	AttemptsHist map[int]int    `json:"attempts_histogram"`
	QueriesHist  map[int]int    `json:"status_queries_histogram"`
	ElapsedSec   float64        `json:"elapsed_s"`
	JobsPerSec   float64        `json:"jobs_per_s"`
	Server       any            `json:"server_counters"`

	// Nodes is how many runner processes shared a Postgres database at
	// once; 0 for a bbolt file (one runner at a time).
	Nodes int `json:"nodes,omitempty"`
	// Schema is the Postgres schema the run used; SchemaKept says it was
	// left in place (the run failed: its jobs are the evidence).
	Schema     string `json:"schema,omitempty"`
	SchemaKept bool   `json:"schema_kept,omitempty"`
	// DBRestarts counts the database crash-restarts made during the run
	// (Config.MidRun).
	DBRestarts int `json:"database_restarts,omitempty"`
	// NodeExits are the nodes that exited by themselves (not killed),
	// each with its exit status and last log line; they were started
	// again.
	NodeExits []string `json:"node_exits,omitempty"`
	// OtherEnds are the jobs that ended other than succeeded, each with
	// its state and the reason it gives.
	OtherEnds []string `json:"other_ends,omitempty"`
	// Evidence holds, per job whose end the target contradicts, its
	// history and the payments the target holds for it.
	Evidence map[string][]string `json:"evidence,omitempty"`
}

// OK reports whether the promise held: no duplicate, nothing lost, no end
// state claiming more than the target holds.
func (s *Summary) OK() bool {
	return len(s.Duplicates) == 0 && len(s.Lost) == 0 && len(s.Violations) == 0
}

// PrintSummary writes the summary a person reads at a glance.
func PrintSummary(w io.Writer, s *Summary) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "idemrun demo — results checked at the target")
	fmt.Fprintf(w, "  jobs enqueued          %d\n", s.Jobs)
	for _, st := range store.States() {
		if n := s.ByState[string(st)]; n > 0 {
			fmt.Fprintf(w, "    %-20s %d\n", st, n)
		}
	}
	fmt.Fprintf(w, "  creates at the server  %d\n", s.Creates)
	fmt.Fprintf(w, "  duplicates             %d   (must be 0)\n", len(s.Duplicates))
	fmt.Fprintf(w, "  lost jobs              %d   (must be 0)\n", len(s.Lost))
	fmt.Fprintf(w, "  false end states       %d   (must be 0)\n", len(s.Violations))
	if s.Nodes > 0 {
		fmt.Fprintf(w, "  runner SIGKILLs        %d   (%d nodes on one Postgres database, started %d times)\n", s.Kills, s.Nodes, s.Starts)
		if s.DBRestarts > 0 {
			fmt.Fprintf(w, "  database crashes       %d   (Postgres stopped -m immediate mid-run, then started again)\n", s.DBRestarts)
		}
		fmt.Fprintf(w, "  nodes exited unkilled  %d   (each started again)\n", len(s.NodeExits))
	} else {
		fmt.Fprintf(w, "  runner SIGKILLs        %d   (runner started %d times)\n", s.Kills, s.Starts)
	}
	fmt.Fprintf(w, "  attempts per job       %s\n", hist(s.AttemptsHist))
	fmt.Fprintf(w, "  status queries per job %s\n", hist(s.QueriesHist))
	fmt.Fprintf(w, "  elapsed                %.1fs (%.0f jobs/s end to end, faults and kills included)\n", s.ElapsedSec, s.JobsPerSec)
	for i, d := range s.Duplicates {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  DUPLICATE %s\n", d)
	}
	for i, l := range s.Lost {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  LOST %s\n", l)
	}
	for i, v := range s.Violations {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  FALSE %s\n", v)
	}
	for i, e := range s.NodeExits {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "  NODE EXIT %s\n", e)
	}
	shown := 0
	for _, k := range slices.Sorted(maps.Keys(s.Evidence)) {
		if shown == 3 {
			break
		}
		shown++
		fmt.Fprintf(w, "  EVIDENCE %s\n", k)
		for _, l := range s.Evidence[k] {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	if s.SchemaKept {
		fmt.Fprintf(w, "  schema %s kept for inspection (idemrun list --schema %s); drop it with DROP SCHEMA %s CASCADE\n", s.Schema, s.Schema, s.Schema)
	}
	if s.OK() {
		fmt.Fprintln(w, "  PASS: every payment created at most once; succeeded ⇔ created once; failed ⇒ never created")
	} else {
		fmt.Fprintln(w, "  FAIL")
	}
}

func hist(h map[int]int) string {
	var ks []int
	for k := range h {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%d:%d", k, h[k]))
	}
	return strings.Join(parts, "  ")
}
