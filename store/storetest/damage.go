package storetest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// DamagedCopies writes damaged copies of the database at good into dir and
// returns their paths by name: truncated to 5000 bytes, to half and to 3/8, the middle
// half of the file flipped, every page after the two meta pages flipped,
// and the bytes after every job key (keys start with keyPrefix) flipped.
// Tests of damaged-file handling in several packages share it.
func DamagedCopies(t testing.TB, good, dir, keyPrefix string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(from, to int) []byte {
		c := append([]byte(nil), b...)
		for i := from; i < to && i < len(c); i++ {
			c[i] ^= 0xa5
		}
		return c
	}
	// Right after each key (in its record, and in the key map) comes
	// what decoding depends on: the rest of the record's structure, or
	// the job id the key maps to. Flipping it is independent of the
	// record encoding.
	records := append([]byte(nil), b...)
	marks := 0
	for i := 0; ; {
		k := bytes.Index(records[i:], []byte(keyPrefix))
		if k < 0 {
			break
		}
		at := i + k + len(keyPrefix)
		for j := at; j < at+8 && j < len(records); j++ {
			records[j] ^= 0xa5
		}
		i = at + 8
		marks++
	}
	if marks == 0 {
		t.Fatalf("no job key found in %s", good)
	}
	copies := map[string][]byte{
		"truncated-5000": b[:5000],
		"truncated-half": b[:len(b)/2],
		"truncated-3of8": b[:len(b)*3/8/4096*4096],
		"middle-flipped": flip(len(b)/4, 3*len(b)/4),
		"pages-flipped":  flip(2*4096, len(b)),
		"records-broken": records,
	}
	out := map[string]string{}
	for name, data := range copies {
		p := filepath.Join(dir, name+".db")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}
