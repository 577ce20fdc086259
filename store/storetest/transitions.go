package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// cardTable returns the transitions the design allows: the arrows of
// the state diagram (docs/status-protocol.md, "States"; ARCHITECTURE.md §2), plus the
// three that the classification (§3) and the limits (§4) require.
func cardTable() map[[2]store.State]bool {
	const (
		pending   = store.StatePending
		running   = store.StateRunning
		unknown   = store.StateUnknown
		succeeded = store.StateSucceeded
		failed    = store.StateFailed
		attention = store.StateNeedsAttention
		canceled  = store.StateCanceled
	)
	return map[[2]store.State]bool{
		// The state diagram.
		{pending, running}:     true, // claim
		{pending, canceled}:    true, // person: cancel
		{running, succeeded}:   true, // 2xx
		{running, failed}:      true, // permanent 4xx, or no limits left
		{running, pending}:     true, // no-effect failure, limits left
		{running, unknown}:     true, // may-have-reached failure, crash
		{unknown, succeeded}:   true, // status: found
		{unknown, failed}:      true, // status: found failed, or not found and no limits left
		{unknown, pending}:     true, // status: not found, limits left (replay)
		{unknown, unknown}:     true, // status: in progress / no answer
		{unknown, attention}:   true, // no way to ask / budget gone
		{attention, succeeded}: true, // person: resolve
		{attention, failed}:    true, // person: resolve
		{failed, pending}:      true, // person: retry
		// §3: a 422 (key reused with another payload) parks a running job.
		{running, attention}: true,
		// §4: limits can run out while a job waits for its next attempt:
		// failed if every outcome was no-effect, needs_attention if one is
		// still unknown (a replay pending inside the key TTL).
		{pending, failed}:    true,
		{pending, attention}: true,
	}
}

func testLegalTable(t *testing.T, _ func(t *testing.T) Store) {
	want := cardTable()
	for _, from := range store.States() {
		for _, to := range store.States() {
			if got, w := store.Legal(from, to), want[[2]store.State{from, to}]; got != w {
				t.Errorf("Legal(%s, %s) = %v; want %v", from, to, got, w)
			}
		}
	}
	for _, s := range store.States() {
		if got, want := s.Terminal(), s == store.StateSucceeded || s == store.StateFailed || s == store.StateCanceled; got != want {
			t.Errorf("%s.Terminal() = %v; want %v", s, got, want)
		}
		for _, to := range store.States() {
			if s.Terminal() && store.Legal(s, to) && !(s == store.StateFailed && to == store.StatePending) {
				t.Errorf("terminal %s may move to %s without a person", s, to)
			}
		}
	}
}

// testTransitions tries every pair of states with FinishClaim: a pair the
// table allows from a claimed state (running, unknown) moves the job and
// its counters; any other pair is refused with ErrIllegalTransition and
// changes nothing. (The table's arrows out of other states are a
// person's: Cancel, Retry and Resolve have their own tests.) A write that keeps the state is
// not a transition (a lease renewal, an "in progress" status answer), so the
// diagonal is tried only where the card draws the self-loop.
func testTransitions(t *testing.T, open func(t *testing.T) Store) {
	for _, from := range store.States() {
		for _, to := range store.States() {
			if from == to && !store.Legal(from, to) {
				continue
			}
			t.Run(string(from)+"_to_"+string(to), func(t *testing.T) {
				t.Parallel()
				s := open(t)
				now := T0()
				j := driveTo(t, s, "k", from, now)
				if from == store.StateUnknown {
					// A status query on an unknown job writes under a claim.
					j = claim(t, s, store.StateUnknown, j.ID, now).Job
				}
				before := stats(t, s)
				got, err := finishAt(s, j.ID, j.Fence, moveTo(to, now.Add(time.Minute)))
				after := stats(t, s)
				if store.Legal(from, to) && (from == store.StateRunning || from == store.StateUnknown) {
					if err != nil {
						t.Fatalf("Finish %s → %s: %v; want it allowed", from, to, err)
					}
					if got.State != to || get(t, s, j.ID).State != to {
						t.Fatalf("Finish %s → %s: job is %s", from, to, got.State)
					}
					want := copyStats(before)
					want[from]--
					want[to]++
					if !statsEqual(after, want) {
						t.Errorf("Stats after %s → %s = %v; want %v", from, to, after, want)
					}
					return
				}
				wantIllegal(t, err, "Finish "+string(from)+" → "+string(to))
				var te *store.TransitionError
				if !errors.As(err, &te) || te.From != from || te.To != to || te.JobID != j.ID {
					t.Errorf("Finish %s → %s: err = %#v; want a *TransitionError naming job %s, %s and %s", from, to, err, j.ID, from, to)
				}
				if got != nil {
					t.Errorf("Finish %s → %s returned job %+v with its refusal", from, to, got)
				}
				wantUnchanged(t, s, j, "refused Finish")
				if !statsEqual(after, before) {
					t.Errorf("Stats after refused %s → %s = %v; want %v", from, to, after, before)
				}
			})
		}
	}
}

func copyStats(m map[store.State]int64) map[store.State]int64 {
	c := make(map[store.State]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func statsEqual(a, b map[store.State]int64) bool {
	for _, s := range store.States() {
		if a[s] != b[s] {
			return false
		}
	}
	return true
}
