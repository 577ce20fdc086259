package storetest

import (
	"reflect"
	"slices"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// methodTests names, for each method of the contracts, the contract tests
// that exercise its documented behaviour. A method added to the contract
// fails EveryMethod until a test covers it here.
var methodTests = map[string][]string{
	// Jobs.
	"Enqueue":           {"EnqueueRoundTrip", "EnqueueInvalid", "EnqueueDuplicateID", "EnqueueSameKeyConcurrent"},
	"EnqueueMany":       {"EnqueueManyMixed", "EnqueueInvalid", "EnqueueDuplicateID"},
	"EnqueueManyFunc":   {"EnqueueManyFunc", "EnqueueManyMixed"},
	"Get":               {"EnqueueRoundTrip", "NotFound", "CountersMatchScan"},
	"GetByKey":          {"EnqueueRoundTrip", "NotFound", "SweepKeyReservations"},
	"List":              {"ListPagination", "CountersMatchScan", "ListFilters", "ListSort"},
	"MatchIDs":          {"ListFilters"},
	"ManualMany":        {"ManualMany"},
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
	"ClaimDue":    {"ClaimDueOrder", "ClaimDueUnknown", "ClaimDueConcurrent", "ClaimDueOwner", "ClaimExpiredOwner", "ClaimSkipHosts", "ClaimAdmit"},
	"FinishClaim": {"Transitions", "FinishFenced", "FinishRefusals", "FinishStaleClaim", "FinishNext", "FinishNextConcurrent", "FinishNextHosts"},
	// FinishLater, of the backends that have it.
	"FinishClaimLater": {"FinishLater", "FinishLaterClose"},
	// Hosts.
	"HostPolicies":     {"HostPolicies", "HostPolicyConcurrent"},
	"UpdateHostPolicy": {"HostPolicies", "HostPolicyConcurrent"},
	"UnsetHostPolicy":  {"HostPolicies"},
	// Store.
	"Check": {"Check", "CountersMatchScan"},
	"Close": {"Close"},
}

// contracts are the interfaces of the contract (FinishLater only of the
// backends that implement it).
var contracts = []reflect.Type{reflect.TypeFor[store.Store](), reflect.TypeFor[store.FinishLater]()}

// testEveryMethod fails when a method of the contracts has no contract
// test named in methodTests, or methodTests names a test the suite lacks.
func testEveryMethod(t *testing.T, _ func(t *testing.T) Store) {
	var names []string
	for _, tt := range suite() {
		names = append(names, tt.name)
	}
	has := func(m string) bool {
		for _, iface := range contracts {
			if _, ok := iface.MethodByName(m); ok {
				return true
			}
		}
		return false
	}
	for _, iface := range contracts {
		for i := range iface.NumMethod() {
			m := iface.Method(i).Name
			if len(methodTests[m]) == 0 {
				t.Errorf("%s.%s has no contract test; add one and name it in methodTests", iface, m)
			}
		}
	}
	for m, tests := range methodTests {
		if !has(m) {
			t.Errorf("methodTests names %s, which no contract interface has", m)
		}
		for _, name := range tests {
			if !slices.Contains(names, name) {
				t.Errorf("methodTests names test %s for %s; the suite has no such test", name, m)
			}
		}
	}
}
