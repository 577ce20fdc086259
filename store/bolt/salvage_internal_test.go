package bolt

import (
	"slices"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// salvageNames reads every name still readable from a damaged list, past
// the damage too (found in a review: it stopped at the first bad token, so
// one damaged byte near the start lost nearly every name).
func TestSalvageNamesReadsPastTheDamage(t *testing.T) {
	for damaged, want := range map[string][]string{
		`["x-a-pin","x-oth`:            {"x-a-pin", "x-oth"},
		`["x-a-pin"."x-z-pin"]`:        {"x-a-pin", "x-z-pin"},
		"[\"x-a-p\x01n\",\"x-z-pin\"]": {"x-z-pin"},
		`{"x-a-pin","x-z-pin"]`:        {"x-a-pin", "x-z-pin"},
		`["x-a-pin","x-z-pin"]`:        {"x-a-pin", "x-z-pin"},
	} {
		got := store.SalvageNames([]byte(damaged))
		for _, w := range want {
			if _, ok := slices.BinarySearch(got, w); !ok {
				t.Errorf("%q: salvaged %q, missing %q", damaged, got, w)
			}
		}
	}
}
