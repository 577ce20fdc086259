package bolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/idemrun/idemrun/store"
	bbolt "go.etcd.io/bbolt"
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
// and sorted; both are empty for a database that has none. A list that
// does not decode gives a *DamagedNamesError.
func (db *DB) SensitiveNames() (headers, params []string, err error) {
	var herr, perr error
	err = db.view(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		headers, herr = decodeNames(meta.Get(metaSensitiveHeaders))
		params, perr = decodeNames(meta.Get(metaSensitiveParams))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if herr != nil || perr != nil {
		return nil, nil, &store.DamagedNamesError{Path: db.path, Headers: herr != nil, Params: perr != nil, Err: errors.Join(herr, perr)}
	}
	return headers, params, nil
}

// AddSensitiveNames records extra sensitive header names and URL query
// parameter names in the database, in addition to those recorded before
// (names are never removed: a name once treated as a secret stays one).
// Names are compared without regard to case; blank ones are ignored. It
// commits only when a name is new. A damaged list (DamagedNamesError) that
// names are given for is rebuilt from the names given and every name that
// can still be read from it (salvageNames), and rebuilt reports that; a
// damaged list that no names are given for stays as it is.
func (db *DB) AddSensitiveNames(headers, params []string) (rebuilt bool, err error) {
	hs, ps := store.NormalNames(headers), store.NormalNames(params)
	if len(hs) == 0 && len(ps) == 0 {
		return false, nil
	}
	oldH, oldP, err := db.SensitiveNames()
	var damaged *store.DamagedNamesError
	if err != nil && !errors.As(err, &damaged) {
		return false, err
	}
	if err == nil && store.SubsetNames(hs, oldH) && store.SubsetNames(ps, oldP) {
		return false, nil
	}
	err = db.write(func(tx *bbolt.Tx) error {
		rebuilt = false // the op may run again alone if its batch fails
		meta := tx.Bucket(bucketMeta)
		changed := false
		for _, f := range []struct {
			key   []byte
			names []string
		}{{metaSensitiveHeaders, hs}, {metaSensitiveParams, ps}} {
			if len(f.names) == 0 {
				continue // a damaged list of the other kind stays damaged
			}
			raw := meta.Get(f.key)
			old, err := decodeNames(raw)
			if err != nil {
				old = store.SalvageNames(raw)
				rebuilt = true
			}
			all := store.NormalNames(append(old, f.names...))
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
	return rebuilt && err == nil, err
}

func decodeNames(v []byte) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' {
		// Only arrays are written: anything else (null included, which
		// would read as no names) is damage.
		return nil, errors.New("not a JSON array of names")
	}
	var names []string
	if err := json.Unmarshal(v, &names); err != nil {
		return nil, err
	}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			// Blank names are never written ([null] decodes as one).
			return nil, errors.New("a blank or null name")
		}
	}
	return store.NormalNames(names), nil
}
