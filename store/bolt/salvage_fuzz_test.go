package bolt

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// salvageNames never panics, returns sorted non-blank names, and loses no
// name of a list that is well formed.
func FuzzSalvageNames(f *testing.F) {
	for _, s := range []string{`["x-a-pin","x-z-pin"]`, `["a\"b","c"]`, `"\`, `"\"`, `["a b","c d"]`, "[\"\\u00", `[null]`, "\xff\"\xfe\"", `""""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got := store.SalvageNames(v)
		if !slices.IsSorted(got) {
			t.Fatalf("not sorted")
		}
		for _, n := range got {
			if strings.TrimSpace(n) == "" {
				t.Fatalf("blank name")
			}
		}
		// A well-formed list's names are all salvaged.
		var names []string
		if json.Unmarshal(v, &names) == nil {
			for _, n := range store.NormalNames(names) {
				if _, ok := slices.BinarySearch(got, n); !ok {
					t.Fatalf("%q: well-formed name %q lost (got %q)", v, n, got)
				}
			}
		}
	})
}

// One damaged closing quote shifts the pairing of the quotes after it; a
// later whole literal whose name holds a separator (space, comma) is still
// salvaged (found in a review: it was lost).
func TestSalvageNamesAfterAShiftedQuote(t *testing.T) {
	list, _ := json.Marshal([]string{"a b", "session id", "x"})
	v := []byte(string(list))
	i := strings.Index(string(v), `b"`) + 1
	v[i] = 'q' // `["a bq,"session id","x"]`
	got := store.SalvageNames(v)
	if _, ok := slices.BinarySearch(got, "session id"); !ok {
		t.Errorf("%s: salvaged %q, lost whole literal \"session id\"", v, got)
	}
}

// decodeNames accepts what AddSensitiveNames writes, names with inner
// spaces and escapes included.
func TestDecodeNamesAcceptsWhatIsWritten(t *testing.T) {
	for _, names := range [][]string{{"a b"}, {"x\ty"}, {"<a&b>"}, {"\u00a0x"}, {"é"}, {"a\"b"}, {"\xff"}} {
		v, _ := json.Marshal(store.NormalNames(names))
		if _, err := decodeNames(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}
