package storetest

import (
	"testing"

	"github.com/idemrun/idemrun/store"
)

// testCheck: Check finds nothing wrong with a sound store, empty or
// holding a job in every state, and counts its jobs.
func testCheck(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	if rep, err := s.Check(); err != nil || !rep.OK() || rep.Jobs != 0 {
		t.Errorf("Check of a new store = %+v, %v; want 0 jobs, no problems", rep, err)
	}
	driveAll(t, s, "c-", store.States(), T0())
	if rep, err := s.Check(); err != nil || !rep.OK() || rep.Jobs != len(store.States()) {
		t.Errorf("Check = %+v, %v; want %d jobs, no problems", rep, err, len(store.States()))
	}
}
