package storetest

import (
	"slices"
	"strings"
	"testing"
)

// testSensitiveNames: a new store records no sensitive names; added names
// are recorded by kind (header or URL parameter) and never removed; a
// sound store never reports a rebuild. Names are compared without regard
// to case, as header names are: the contract does not say how a backend
// spells them back.
func testSensitiveNames(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	want := func(wantH, wantP []string, when string) {
		t.Helper()
		h, p, err := s.SensitiveNames()
		if err != nil || !sameNames(h, wantH) || !sameNames(p, wantP) {
			t.Errorf("SensitiveNames %s = %q, %q, %v; want %q, %q", when, h, p, err, wantH, wantP)
		}
	}
	add := func(h, p []string) {
		t.Helper()
		if rebuilt, err := s.AddSensitiveNames(h, p); err != nil || rebuilt {
			t.Errorf("AddSensitiveNames(%q, %q) = rebuilt %v, %v; want false, nil on a sound store", h, p, rebuilt, err)
		}
	}
	want(nil, nil, "of a new store")
	add(nil, nil)
	want(nil, nil, "after adding nothing")
	add([]string{"X-Api-Key"}, []string{"token"})
	want([]string{"x-api-key"}, []string{"token"}, "after the first names")
	add([]string{"X-Session"}, nil)
	want([]string{"x-api-key", "x-session"}, []string{"token"}, "after a header name more")
	add(nil, []string{"sig"})
	want([]string{"x-api-key", "x-session"}, []string{"sig", "token"}, "after a parameter name more")
	// Adding names already recorded (in another case) removes none and
	// adds none.
	add([]string{"X-API-KEY"}, []string{"Token"})
	want([]string{"x-api-key", "x-session"}, []string{"sig", "token"}, "after adding recorded names again")
}

// sameNames reports whether got and want hold the same names, ignoring
// case, order and repeats.
func sameNames(got, want []string) bool {
	fold := func(names []string) []string {
		var out []string
		for _, n := range names {
			out = append(out, strings.ToLower(n))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(fold(got), fold(want))
}
