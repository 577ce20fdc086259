package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
)

// verify compares every job of the bbolt file at dbPath with the target's
// ground truth.
func verify(dbPath string, target *faketarget.Server, keys []string, sum *Summary) error {
	c, err := api.Open(dbPath, &api.Options{LockTimeout: 5 * time.Second, MustExist: true, Direct: true})
	if err != nil {
		return fmt.Errorf("demo: reopen: %w", err)
	}
	defer c.Close()
	return verifyJobs(c, target, keys, sum)
}

// verifyJobs compares every job in c's store with the target's ground
// truth; no runner may be working on the store.
func verifyJobs(c *api.Client, target *faketarget.Server, keys []string, sum *Summary) error {
	if rep, err := c.Check(context.Background()); err != nil || !rep.OK() {
		return fmt.Errorf("demo: database check failed: %v %v", err, rep.Problems)
	}
	sum.ByState = map[string]int{}
	sum.AttemptsHist = map[int]int{}
	sum.QueriesHist = map[int]int{}
	// A create still on its way when the last runner stopped (in the
	// target's latency pause, or committing slowly) happens in reality:
	// settle them before reading the truth.
	if !target.Settle(2 * time.Minute) {
		return errors.New("demo: the target's create handlers did not settle within 2 minutes")
	}
	jobs := make(map[string]*store.Job, len(keys))
	jobOf := make(map[string]string, len(keys))    // amount (unique per job) → key
	enqueued := make(map[string][]byte, len(keys)) // key → the body the demo enqueued
	for i, k := range keys {
		enqueued[k] = demoBody(i, k)
		jobOf[strconv.Itoa(100+i)] = k
		j, err := c.Store().GetByKey(k)
		if errors.Is(err, store.ErrNotFound) {
			continue // lost; reported below
		}
		if err != nil {
			return err
		}
		jobs[k] = j
		if !bytes.Equal(j.Request.Body, enqueued[k]) {
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s: the store holds the body %q, not the enqueued %q (P2)", k, j.Request.Body, enqueued[k]))
		}
	}
	// Payments are counted by what they pay for (the amount of their body,
	// unique per job), not by the key they came under: a duplicate sent
	// under another key is a duplicate all the same, and a key other than
	// the job's breaks P2.
	creates := map[string]int{}
	for hk := range target.CreatesByKey() {
		for _, p := range target.Payments(hk) {
			sum.Creates++
			k, ok := jobOf[string(p.Amount)]
			if !ok {
				sum.Violations = append(sum.Violations, fmt.Sprintf("payment %s under key %q belongs to no job", p.ID, hk))
				continue
			}
			creates[k]++
			if hk != k {
				sum.Violations = append(sum.Violations, fmt.Sprintf("payment %s for %s was sent under key %q (P2)", p.ID, k, hk))
			}
		}
	}
	for _, k := range keys {
		j := jobs[k]
		if j == nil {
			sum.Lost = append(sum.Lost, k)
			continue
		}
		// P2: every request the target received under the key carried the
		// bytes that were enqueued.
		for _, body := range target.BodiesByKey(k) {
			if !bytes.Equal(body, enqueued[k]) {
				sum.Violations = append(sum.Violations, fmt.Sprintf("%s: the target received a body %q, not the enqueued %q (P2)", k, body, enqueued[k]))
				break
			}
		}
		sum.ByState[string(j.State)]++
		sum.AttemptsHist[j.Attempts]++
		sum.QueriesHist[j.StatusQueries]++
		n := creates[k]
		switch {
		case n > 1:
			sum.Duplicates = append(sum.Duplicates, k)
		case j.State == store.StateSucceeded && n != 1:
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s succeeded but the target holds %d payments", k, n))
		case j.State == store.StateFailed && n != 0:
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s failed but the target holds %d payments", k, n))
		case j.State == store.StateCanceled && n != 0:
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s canceled but the target holds %d payments", k, n))
		case !j.State.Terminal() && j.State != store.StateNeedsAttention:
			sum.Lost = append(sum.Lost, k+" (left "+string(j.State)+")")
		}
		if j.State != store.StateSucceeded {
			why := j.Reason
			if why == "" {
				why = j.LastError
			}
			sum.OtherEnds = append(sum.OtherEnds, fmt.Sprintf("%s: %s after %d attempt(s) and %d status queries: %s", k, j.State, j.Attempts, j.StatusQueries, why))
		}
		if n > 1 || (j.State == store.StateSucceeded && n != 1) || (j.State.Terminal() && j.State != store.StateSucceeded && n != 0) {
			if sum.Evidence == nil {
				sum.Evidence = map[string][]string{}
			}
			sum.Evidence[k] = evidence(j, target.Payments(k))
		}
	}
	sort.Strings(sum.Duplicates)
	return nil
}

// evidence is what a person needs to find why a job's end and the
// target disagree: the job's history, every attempt and query with its
// owner's claim, and the payments the target holds under its key.
func evidence(j *store.Job, pays []faketarget.Payment) []string {
	out := []string{fmt.Sprintf("job %s key %s state %s attempts %d fence %d owner %s", j.ID, j.Key, j.State, j.Attempts, j.Fence, j.Owner)}
	if j.HistoryDropped > 0 {
		out = append(out, fmt.Sprintf("(%d older events dropped)", j.HistoryDropped))
	}
	for _, e := range j.History {
		line := fmt.Sprintf("%s %s #%d", e.Start.Format("15:04:05.000"), e.Kind, e.N)
		for _, f := range []struct{ k, v string }{{"end", fmtTime(e.End)}, {"class", e.Class}, {"status", nonZero(e.HTTPStatus)},
			{"error", e.Error}, {"outcome", e.Outcome}, {"detail", e.Detail}, {"from", string(e.From)}, {"to", string(e.To)}, {"note", e.Note}} {
			if f.v != "" {
				line += " " + f.k + "=" + strconv.Quote(f.v)
			}
		}
		out = append(out, line)
	}
	for _, p := range pays {
		out = append(out, fmt.Sprintf("target holds %s (amount %s)", p.ID, p.Amount))
	}
	return out
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("15:04:05.000")
}

func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
