package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// cardTable returns the transitions the design card allows: the arrows of
// its state diagram (§2), plus the three that its other sections require.
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
		// §2 diagram.
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

func testFinishFenced(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	j := driveTo(t, s, "k", store.StateRunning, now)
	if j.Fence == 0 {
		t.Fatalf("claimed job has fence 0; a claim must raise the fence")
	}
	for _, fence := range []uint64{j.Fence - 1, j.Fence + 1, 0} {
		_, err := finishAt(s, j.ID, fence, moveTo(store.StateSucceeded, now))
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("Finish with fence %d (job has %d): err = %v; want ErrFenced", fence, j.Fence, err)
		}
		wantUnchanged(t, s, j, "fenced Finish")
	}

	// A worker claims, the process crashes, recovery makes the job unknown
	// and a status query claims it again: the first worker is now stale.
	stale := j.Fence
	if n, err := s.Rescue(ctx, now.Add(time.Second), nil); err != nil || n != 1 {
		t.Fatalf("RecoverRunning = %d, %v; want 1, nil", n, err)
	}
	c := claim(t, s, store.StateUnknown, j.ID, now.Add(2*time.Second))
	if c.Fence <= stale {
		t.Fatalf("second claim fence %d; want above %d", c.Fence, stale)
	}
	before := stats(t, s)
	_, err := finishAt(s, j.ID, stale, moveTo(store.StateSucceeded, now.Add(3*time.Second)))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale worker's Finish: err = %v; want ErrFenced", err)
	}
	if after := stats(t, s); !statsEqual(after, before) {
		t.Errorf("Stats after fenced Finish = %v; want %v", after, before)
	}
	wantUnchanged(t, s, c.Job, "stale worker's Finish")
	finish(t, s, j.ID, c.Fence, store.StateSucceeded, now.Add(3*time.Second))
}

func testFinishRefusals(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	now := T0()
	j := driveTo(t, s, "k", store.StateRunning, now)
	errMine := errors.New("storetest: refused by fn")
	cases := []struct {
		name string
		fn   store.TransitionFunc
		is   error
	}{
		{"fn error", func(j *store.Job) error { j.State = store.StateSucceeded; return errMine }, errMine},
		{"key change", func(j *store.Job) error { j.Key = "other"; return nil }, nil},
		{"id change", func(j *store.Job) error { j.ID = store.NewID(); return nil }, nil},
	}
	for _, tc := range cases {
		got, err := finishAt(s, j.ID, j.Fence, tc.fn)
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Finish with %s = %v, %v; want refusal %v", tc.name, got, err, tc.is)
		}
		wantUnchanged(t, s, j, "Finish with "+tc.name)
	}
	if _, err := s.GetByKey("other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetByKey(other) after refused key change: err = %v; want ErrNotFound", err)
	}
	// Several refused writes later, the job still finishes.
	finish(t, s, j.ID, j.Fence, store.StateSucceeded, now)
}
