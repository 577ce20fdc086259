// Package bolttest damages idemrun's bbolt files on purpose, for the tests
// of the packages above store/bolt: they check how damage is reported
// without reaching into bbolt themselves.
package bolttest

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/uuid"
	bbolt "go.etcd.io/bbolt"
)

// PutMeta writes val under key in the meta bucket of the closed file at
// path (the recorded sensitive names live there).
func PutMeta(t testing.TB, path, key, val string) {
	t.Helper()
	update(t, path, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte(key), []byte(val))
	})
}

// DamageRecord sets byte at of job id's stored record to b, in the closed
// file at path.
func DamageRecord(t testing.TB, path, id string, at int, b byte) {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	update(t, path, func(tx *bbolt.Tx) error {
		jobs := tx.Bucket([]byte("jobs"))
		v := append([]byte(nil), jobs.Get(u[:])...)
		if at >= len(v) {
			t.Fatalf("job %s: record of %d bytes has no byte %d", id, len(v), at)
		}
		v[at] = b
		return jobs.Put(u[:], v)
	})
}

// DamageJobLeaf breaks the page-type flags of one live leaf page that
// holds a job body of 512 'b' bytes, leaving the meta pages, the freelist
// and the root page alone, so the file still opens.
func DamageJobLeaf(t testing.TB, path string) {
	t.Helper()
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	var live []int
	err = bdb.View(func(tx *bbolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p == nil {
				return nil
			}
			if p.Type == "leaf" {
				live = append(live, id)
			}
		}
	})
	ps := bdb.Info().PageSize
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("b"), 512)
	for _, id := range live {
		pg := b[id*ps : (id+1)*ps]
		if bytes.Contains(pg, body) {
			pg[8], pg[9] = 0x40, 0x00 // flags: no known page type
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("no live leaf page with a job body found")
}

func update(t testing.TB, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	b, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
