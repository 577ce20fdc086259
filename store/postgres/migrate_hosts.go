package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// migrationCode is the Go part of a migration, by version, run after its
// SQL in the same transaction: what SQL cannot compute as idemrun does.
var migrationCode = map[int]func(ctx context.Context, tx pgx.Tx, schema string) error{
	2: backfillHosts,
}

// backfillHosts fills the host column of migration 2 for the jobs it
// finds, as store.ClaimHost computes it, a thousand rows at a time. A
// record that does not decode keeps ” (Check reports the record).
func backfillHosts(ctx context.Context, tx pgx.Tx, schema string) error {
	const page = 1000
	var after *string // the last id seen; nil before the first page
	for got := page; got == page; {
		rows, err := tx.Query(ctx, `SELECT id::text, job FROM `+schema+`.jobs
			WHERE $1::uuid IS NULL OR id > $1::uuid ORDER BY id LIMIT $2`, after, page)
		if err != nil {
			return err
		}
		var ids, hosts []string
		got = 0
		for rows.Next() {
			var id string
			var rec []byte
			if err := rows.Scan(&id, &rec); err != nil {
				rows.Close()
				return err
			}
			got++
			after = &id
			if h := hostOfRecord(rec); h != "" {
				ids, hosts = append(ids, id), append(hosts, h)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE `+schema+`.jobs j SET host = v.host
			FROM unnest($1::uuid[], $2::text[]) AS v(id, host) WHERE j.id = v.id`, ids, hosts); err != nil {
			return err
		}
	}
	return nil
}

// hostOfRecord is store.ClaimHost of a stored job record, read leniently:
// only the fields ClaimHost needs.
func hostOfRecord(rec []byte) string {
	var j store.Job
	if err := json.Unmarshal(rec, &j); err != nil {
		return ""
	}
	return store.ClaimHost(&j)
}
