package storetest

import (
	"reflect"
	"slices"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// methodTests names, for each method of store.Store, the contract tests
// that exercise its documented behaviour. A method added to the contract
// fails EveryMethod until a test covers it here.
var methodTests = map[string][]string{
	// Jobs.
	"Enqueue":           {"EnqueueRoundTrip", "EnqueueInvalid", "EnqueueDuplicateID", "EnqueueSameKeyConcurrent"},
	"EnqueueMany":       {"EnqueueManyMixed", "EnqueueInvalid", "EnqueueDuplicateID"},
	"EnqueueManyFunc":   {"EnqueueManyFunc", "EnqueueManyMixed"},
	"Get":               {"EnqueueRoundTrip", "NotFound", "CountersMatchScan"},
	"GetByKey":          {"EnqueueRoundTrip", "NotFound", "SweepKeyReservations"},
	"List":              {"ListPagination", "CountersMatchScan"},
	"Stats":             {"CountersMatchScan", "ListPagination", "Transitions", "EnqueueInvalid"},
	"OldestDue":         {"OldestDue"},
	"Cancel":            {"Cancel", "NotFound"},
	"Retry":             {"Retry", "NotFound"},
	"Resolve":           {"Resolve", "NotFound"},
	"Sweep":             {"Sweep", "SweepKeyReservations"},
	"SensitiveNames":    {"SensitiveNames"},
	"AddSensitiveNames": {"SensitiveNames"},
	// Work.
	"Register":    {"Leases", "RescueLeases"},
	"Heartbeat":   {"Leases", "ClaimExpiredOwner"},
	"Deregister":  {"Leases", "RescueLeases"},
	"Leases":      {"Leases", "RescueLeases"},
	"Rescue":      {"RescueNoLeases", "RescueLeases", "ClaimExpiredOwner", "FinishFenced"},
	"ClaimDue":    {"ClaimDueOrder", "ClaimDueUnknown", "ClaimDueConcurrent", "ClaimDueOwner", "ClaimExpiredOwner"},
	"FinishClaim": {"Transitions", "FinishFenced", "FinishRefusals", "FinishStaleClaim", "FinishNext", "FinishNextConcurrent"},
	// Store.
	"Check": {"Check", "CountersMatchScan"},
	"Close": {"Close"},
}

// testEveryMethod fails when a method of store.Store has no contract test
// named in methodTests, or methodTests names a test the suite lacks.
func testEveryMethod(t *testing.T, _ func(t *testing.T) Store) {
	var names []string
	for _, tt := range suite() {
		names = append(names, tt.name)
	}
	iface := reflect.TypeFor[store.Store]()
	for i := range iface.NumMethod() {
		m := iface.Method(i).Name
		if len(methodTests[m]) == 0 {
			t.Errorf("store.Store.%s has no contract test; add one and name it in methodTests", m)
		}
	}
	for m, tests := range methodTests {
		if _, ok := iface.MethodByName(m); !ok {
			t.Errorf("methodTests names %s, which store.Store does not have", m)
		}
		for _, name := range tests {
			if !slices.Contains(names, name) {
				t.Errorf("methodTests names test %s for %s; the suite has no such test", name, m)
			}
		}
	}
}
