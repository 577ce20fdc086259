package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The extra sensitive names a database was opened with are kept in its meta
// bucket, so every process that opens the file later (the CLI, a runner's
// admin API, its logs) redacts them too, whatever options it was given.
var (
	metaSensitiveHeaders = []byte("sensitive_headers")
	metaSensitiveParams  = []byte("sensitive_params")
)

// SensitiveNames returns the extra sensitive header names and URL query
// parameter names recorded in the database (AddSensitiveNames), lower-cased
// and sorted; both are empty for a database that has none.
func (db *DB) SensitiveNames() (headers, params []string, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		var err error
		if headers, err = decodeNames(meta.Get(metaSensitiveHeaders)); err != nil {
			return err
		}
		params, err = decodeNames(meta.Get(metaSensitiveParams))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: %s: reading its sensitive names: %w", db.path, err)
	}
	return headers, params, nil
}

// AddSensitiveNames records extra sensitive header names and URL query
// parameter names in the database, in addition to those recorded before
// (names are never removed: a name once treated as a secret stays one).
// Names are compared without regard to case; blank ones are ignored. It
// commits only when a name is new. A recorded list that cannot be read
// (ErrCorrupt from SensitiveNames) is replaced by the names given, when
// names are given for it: what it held cannot be known any more.
func (db *DB) AddSensitiveNames(headers, params []string) error {
	hs, ps := normalNames(headers), normalNames(params)
	if len(hs) == 0 && len(ps) == 0 {
		return nil
	}
	oldH, oldP, err := db.SensitiveNames()
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if err == nil && subset(hs, oldH) && subset(ps, oldP) {
		return nil
	}
	return db.write(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		changed := false
		for _, f := range []struct {
			key   []byte
			names []string
		}{{metaSensitiveHeaders, hs}, {metaSensitiveParams, ps}} {
			if len(f.names) == 0 {
				continue
			}
			old, err := decodeNames(meta.Get(f.key))
			if err != nil {
				old = nil // damaged: replaced by the names given
			}
			all := normalNames(append(old, f.names...))
			if err == nil && slices.Equal(all, old) {
				continue
			}
			v, err := json.Marshal(all)
			if err != nil {
				return err
			}
			if err := fatal(meta.Put(f.key, v)); err != nil {
				return err
			}
			changed = true
		}
		if !changed {
			return nothingWritten(nil)
		}
		return nil
	})
}

func decodeNames(v []byte) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(v, &names); err != nil {
		return nil, fmt.Errorf("%w: its recorded sensitive names do not decode (%v)", ErrCorrupt, err)
	}
	return normalNames(names), nil
}

// normalNames lower-cases and trims names, drops blank ones and
// duplicates, and sorts them.
func normalNames(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func subset(a, b []string) bool {
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			return false
		}
	}
	return true
}
