//go:build linux

package bench

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkFsyncPages writes 32 pages of 4 KiB into a 400 MiB file and
// fdatasyncs it, the I/O of one group commit, with the pages adjacent or
// scattered over the file. It is why the store uses bbolt's array freelist,
// which hands out the lowest free pages first, instead of the hashmap one:
// see store.Open and BENCHMARKS.md.
//
//	go test -run '^$' -bench FsyncPages -benchtime 300x -count 3 ./internal/bench/
func BenchmarkFsyncPages(b *testing.B) {
	const pages, perSync, pageSize = 100_000, 32, 4096
	path := filepath.Join(b.TempDir(), "pages")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256*pageSize)
	for off := int64(0); off < pages*pageSize; off += int64(len(chunk)) {
		if _, err := f.WriteAt(chunk, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	page := make([]byte, pageSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []string{"adjacent", "scattered"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				base := rng.IntN(pages - perSync)
				for i := range perSync {
					p := base + i
					if mode == "scattered" {
						p = rng.IntN(pages)
					}
					if _, err := f.WriteAt(page, int64(p)*pageSize); err != nil {
						b.Fatal(err)
					}
				}
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
