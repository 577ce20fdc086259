package bolt_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/idemrun/idemrun/store"
)

// TestOpenRefusesWhenMetaMagicIsGone with one more damaged page, holding
// garbage whose header reads as a leaf with a large overflow, ahead of the
// job leaves: the scan reads past it, finds the jobs, and Open refuses the
// file instead of laying out a fresh database over the 30 jobs.
func TestGarbagePageHidesNoJobs(t *testing.T) {
	path := copyInOneTx(t, t.TempDir(), 0)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	for p := 0; p*ps < len(b); p++ {
		h := b[p*ps:]
		t.Logf("page %d: flags %#x count %d overflow %d", p, binary.LittleEndian.Uint16(h[8:]), binary.LittleEndian.Uint16(h[10:]), binary.LittleEndian.Uint32(h[12:]))
	}
	for i := 0; i < 512; i++ {
		b[i] = 0 // meta page 0's first sector, as in TestOpenRefusesWhenMetaMagicIsGone
	}
	// Find the first page at or after 4 (bbolt's fallen-back empty tree
	// reads pages 2 and 3 only) and garble it: random bytes whose header
	// has the leaf bit and a big overflow.
	g := b[4*ps : 5*ps]
	for i := range g {
		g[i] = byte(i*131 + 7)
	}
	binary.LittleEndian.PutUint16(g[8:], 0x12)
	binary.LittleEndian.PutUint32(g[12:], 0x9e3779b9)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	err = openRefused(t, path, "a file with job records in pages 5..")
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	t.Logf("Open: %v", err)
}
