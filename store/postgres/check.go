package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// Check verifies the stored data against idemrun's invariants, in one
// snapshot: the schema is at this version; every job row decodes, and
// its columns are the ones its job gives (id, key, state, times, fence,
// attempts, owner, host); no key is both a job's and reserved, and no
// reservation names a job that exists; the recorded sensitive names,
// the leases and the host policies decode. Postgres keeps its own
// structures sound; what is checked here is what idemrun writes. It
// reads every row.
func (db *DB) Check() (store.CheckReport, error) {
	var rep store.CheckReport
	if err := db.usable(bg); err != nil {
		return rep, err
	}
	add := func(format string, a ...any) {
		if len(rep.Problems) < 100 {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, a...))
		}
	}
	err := db.snapshot(bg, func(tx pgx.Tx) error {
		rep = store.CheckReport{}
		v, err := schemaVersion(bg, tx, db.schema)
		if err != nil {
			return err
		}
		if err := versionError(db.where, v); err != nil {
			add("%v", err)
		}
		rows, err := tx.Query(bg, db.q.checkJobs)
		if err != nil {
			return err
		}
		for rows.Next() {
			var c cols
			var sortNS int64
			if err := rows.Scan(&c.id, &c.key, &c.state, &c.next, &c.updated, &c.fence, &c.attempts, &c.owner, &c.job, &c.host, &sortNS); err != nil {
				rows.Close()
				return err
			}
			rep.Jobs++
			j, err := decodeJob(c.job)
			if err != nil {
				add("job %s: %v", c.id, err)
				continue
			}
			want, err := colsOf(j)
			if err != nil {
				add("job %s: %v", c.id, err)
				continue
			}
			for _, d := range []struct {
				name      string
				got, want any
			}{
				{"id", c.id, want.id}, {"key", c.key, want.key}, {"state", c.state, want.state},
				{"next_run_ns", c.next, want.next}, {"updated_ns", c.updated, want.updated},
				{"fence", c.fence, want.fence}, {"attempts", c.attempts, want.attempts}, {"owner", c.owner, want.owner},
				{"host", c.host, want.host},
				{"sort_ns", sortNS, sortNanos(j)},
			} {
				if d.got != d.want {
					add("job %s: column %s is %v, its record says %v", c.id, d.name, d.got, d.want)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, q := range []struct{ sql, format string }{
			{db.q.checkTombKeys, "key %q is reserved for a deleted job, and job %s holds it"},
			{db.q.checkTombIDs, "key %q is reserved for deleted job %s, which exists"},
		} {
			rows, err := tx.Query(bg, q.sql)
			if err != nil {
				return err
			}
			for rows.Next() {
				var key, id string
				if err := rows.Scan(&key, &id); err != nil {
					rows.Close()
					return err
				}
				add(q.format, key, id)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		rec, err := db.readNames(tx)
		if err != nil {
			return err
		}
		for _, name := range []string{metaSensitiveHeaders, metaSensitiveParams} {
			if _, err := decodeNames(rec, name); err != nil {
				add("meta %s: the recorded sensitive names do not decode (%v); every header and URL parameter value is shown redacted until the application opens the store with its sensitive names again, which rebuilds the list from those and the names still readable in it", name, err)
			}
		}
		rows, err = tx.Query(bg, db.q.runners)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var info []byte
			if err := rows.Scan(&id, &info); err != nil {
				rows.Close()
				return err
			}
			if _, err := decodeRunnerInfo(info); err != nil {
				add("runner %s: its lease does not decode: %v", id, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(bg, db.q.hostPolicies)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var host string
			var rec []byte
			if err := rows.Scan(&host, &rec); err != nil {
				return err
			}
			if _, err := decodePolicy(host, rec); err != nil {
				add("%v", err)
			}
		}
		return rows.Err()
	})
	return rep, err
}
