package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// The extra sensitive names are rows of the meta table, so every process
// that opens the database (a runner's admin API, its logs, a CLI) redacts
// them too, whatever options it was given. The rules are store/bolt's.
const (
	metaSensitiveHeaders = "sensitive_headers"
	metaSensitiveParams  = "sensitive_params"
)

// readNames returns the recorded lists of names by meta row name.
func (db *DB) readNames(q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) (map[string]string, error) {
	rows, err := q.Query(bg, db.q.names, []string{metaSensitiveHeaders, metaSensitiveParams})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, rows.Err()
}

// SensitiveNames returns the extra sensitive header and URL parameter
// names recorded in the database, lower-cased and sorted. A list that does
// not decode gives a *store.DamagedNamesError.
func (db *DB) SensitiveNames() (headers, params []string, err error) {
	if err := db.usable(bg); err != nil {
		return nil, nil, err
	}
	rec, err := db.readNames(db.pool)
	if err != nil {
		return nil, nil, db.wrap(fmt.Errorf("store: sensitive names in %s: %w", db.where, err))
	}
	return db.decodeRecorded(rec)
}

func (db *DB) decodeRecorded(rec map[string]string) (headers, params []string, err error) {
	headers, herr := decodeNames(rec, metaSensitiveHeaders)
	params, perr := decodeNames(rec, metaSensitiveParams)
	if herr != nil || perr != nil {
		return nil, nil, &store.DamagedNamesError{Path: db.where, Headers: herr != nil, Params: perr != nil, Err: errors.Join(herr, perr)}
	}
	return headers, params, nil
}

// AddSensitiveNames records more sensitive names (never removing one),
// writing only when a name is new. A damaged list that names are given
// for is rebuilt from them and every name still readable in it (rebuilt
// reports it); writers take turns under a lock of the meta table.
func (db *DB) AddSensitiveNames(headers, params []string) (rebuilt bool, err error) {
	if err := db.usable(bg); err != nil {
		return false, err
	}
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
	err = db.tx(bg, func(tx pgx.Tx) error {
		rebuilt = false
		if _, err := tx.Exec(bg, db.q.lockMeta); err != nil {
			return err
		}
		rec, err := db.readNames(tx)
		if err != nil {
			return err
		}
		for _, f := range []struct {
			name  string
			names []string
		}{{metaSensitiveHeaders, hs}, {metaSensitiveParams, ps}} {
			if len(f.names) == 0 {
				continue // a damaged list of the other kind stays damaged
			}
			old, err := decodeNames(rec, f.name)
			if err != nil {
				old = store.SalvageNames([]byte(rec[f.name]))
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
			if _, err := tx.Exec(bg, db.q.putMeta, f.name, string(asciiJSON(v))); err != nil {
				return err
			}
		}
		return nil
	})
	return rebuilt && err == nil, err
}

// decodeNames decodes the list recorded under name (none recorded: no
// names).
func decodeNames(rec map[string]string, name string) ([]string, error) {
	v, ok := rec[name]
	if !ok {
		return nil, nil
	}
	if t := strings.TrimSpace(v); len(t) == 0 || t[0] != '[' {
		// Only arrays are written: anything else (null included, which
		// would read as no names) is damage.
		return nil, errors.New("not a JSON array of names")
	}
	var names []string
	if err := json.Unmarshal([]byte(v), &names); err != nil {
		return nil, err
	}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return nil, errors.New("a blank or null name")
		}
	}
	return store.NormalNames(names), nil
}
