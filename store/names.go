package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// SalvageNames returns every name that may still be read from a damaged
// list, generously: each JSON string literal in it that decodes, and each
// run of bytes between quotes, commas, brackets, braces, spaces and control
// bytes. A name too many only hides more; one too few would show a secret.
func SalvageNames(v []byte) []string {
	var out []string
	for i := 0; i < len(v); i++ {
		if v[i] != '"' {
			continue
		}
		j := i + 1
		for ; j < len(v) && v[j] != '"'; j++ {
			if v[j] == '\\' {
				j++
			}
		}
		if j >= len(v) {
			break // an unterminated string: the runs below still read it
		}
		var s string
		if json.Unmarshal(v[i:j+1], &s) == nil {
			out = append(out, s)
		}
		i = j
	}
	// Each span between two consecutive quote bytes, too: a damaged
	// quote shifts the pairing above, and the whole literals after it
	// are still read here (linear: every byte is in at most one span).
	for p := bytes.IndexByte(v, '"'); p >= 0; {
		q := bytes.IndexByte(v[p+1:], '"')
		if q < 0 {
			break
		}
		q += p + 1
		var s string
		if json.Unmarshal(v[p:q+1], &s) == nil {
			out = append(out, s)
		}
		p = q
	}
	out = append(out, strings.FieldsFunc(string(v), func(r rune) bool {
		return r < 0x20 || r == 0x7f || strings.ContainsRune("\"',[]{} ", r)
	})...)
	return NormalNames(out)
}

// NormalNames lower-cases and trims names, drops blank ones and
// duplicates, and sorts them.
func NormalNames(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SubsetNames reports whether every name of a is in b (both normal).
func SubsetNames(a, b []string) bool {
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			return false
		}
	}
	return true
}
