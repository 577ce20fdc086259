package bolt

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// emptyBolt makes a bbolt file with an empty tree (what bbolt.Open lays
// out: 2 meta pages, freelist, empty root leaf) and appends extra pages.
func emptyBolt(t *testing.T, extra ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "e.db")
	b, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range extra {
		f.Write(p)
	}
	f.Close()
	return path
}

func leafPage(count uint16, overflow uint32) []byte {
	p := make([]byte, 4096)
	binary.LittleEndian.PutUint16(p[8:], 0x02)
	binary.LittleEndian.PutUint16(p[10:], count)
	binary.LittleEndian.PutUint32(p[12:], overflow)
	return p
}

// One damaged page whose header claims a leaf with a large overflow: the
// scan reads no more than the file holds, whatever the header claims.
func TestJobRecordsInBoundedAlloc(t *testing.T) {
	path := emptyBolt(t, leafPage(0, 0xFFFFFFFF))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n := jobRecordsIn(path, 4096)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("jobRecordsIn = %d; allocated %d MiB for a %d KiB file", n, alloc>>20, 5*4)
	if alloc > 64<<20 {
		t.Errorf("scanning a 20 KiB file allocated %d MiB", alloc>>20)
	}
}

// A leaf entry whose pos and vsize sum past the int range: on a 32-bit
// platform k+ksize+vsize must not wrap negative and pass the bounds check
// (Open has no recover around this scan): offsets are checked in int64.
func TestJobRecordsInNoWrap(t *testing.T) {
	p := leafPage(1, 0)
	binary.LittleEndian.PutUint32(p[16+4:], 0x7FFFFF00)  // pos
	binary.LittleEndian.PutUint32(p[16+8:], 16)          // ksize
	binary.LittleEndian.PutUint32(p[16+12:], 0x10000000) // vsize
	path := emptyBolt(t, p)
	t.Logf("jobRecordsIn = %d", jobRecordsIn(path, 4096))
}

func FuzzJobRecordsIn(f *testing.F) {
	base, err := os.ReadFile(emptyBoltF(f))
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Add(leafPage(1, 0), uint16(2))
	f.Fuzz(func(t *testing.T, page []byte, flags uint16) {
		if len(page) < 16 {
			return
		}
		page = append([]byte(nil), page...)
		binary.LittleEndian.PutUint16(page[8:], flags)
		if len(page) > 8192 {
			page = page[:8192]
		}
		binary.LittleEndian.PutUint32(page[12:], binary.LittleEndian.Uint32(page[12:])%4)
		path := filepath.Join(dir, "f.db")
		os.WriteFile(path, append(append([]byte(nil), base...), page...), 0o600)
		jobRecordsIn(path, 4096)
	})
}

func emptyBoltF(f *testing.F) string {
	path := filepath.Join(f.TempDir(), "e.db")
	b, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: 4096})
	if err != nil {
		f.Fatal(err)
	}
	b.Close()
	return path
}
