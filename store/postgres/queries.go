package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries are the store's statements with the schema's name filled in.
// Every table name is qualified: nothing depends on the search_path.
type queries struct {
	insert, update, finish, updateMany, finishMany  string
	jobByID, jobByIDLocked, jobByKey, jobExists     string
	tombByKey, tombsByKeys, deleteJobs              string
	due, nextDue, nextDueN                          string
	leaseExpires, register, heartbeat, deregister   string
	leases, dropExpired, rescuable, advisoryXact    string
	releaseTombs, sweep, insertTombs                string
	stats, oldest                                   string
	names, lockMeta, putMeta                        string
	checkJobs, checkTombKeys, checkTombIDs, runners string
	hostPolicies, hostReserve, hostLocked           string
	hostPut, hostDelete, hostCounts                 string
}

const jobCols = `id, key, state, next_run_ns, updated_ns, fence, attempts, owner, job, host`

func newQueries(schema string) queries {
	r := strings.NewReplacer("{schema}", pgx.Identifier{schema}.Sanitize())
	q := queries{
		insert: `INSERT INTO {schema}.jobs (` + jobCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		update: `UPDATE {schema}.jobs SET state = $2, next_run_ns = $3, updated_ns = $4, fence = $5, attempts = $6, owner = $7, job = $8, host = $9 WHERE id = $1`,
		// A finish writes only over the record its claim wrote: the same
		// fence, attempt and owner, and the claimed state and time.
		finish: `UPDATE {schema}.jobs SET state = $2, next_run_ns = $3, updated_ns = $4, fence = $5, attempts = $6, owner = $7, job = $8, host = $9
			WHERE id = $1 AND fence = $10 AND attempts = $11 AND owner = $12 AND state IN ('running', 'unknown') AND state = $13 AND sort_ns = $14`,

		// update and finish over arrays, one element per job: one
		// statement for a batch of jobs.
		updateMany: `UPDATE {schema}.jobs AS j SET state = u.state, next_run_ns = u.next_run_ns, updated_ns = u.updated_ns,
				fence = u.fence, attempts = u.attempts, owner = u.owner, job = u.job, host = u.host
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::bytea[], $9::text[])
				AS u(id, state, next_run_ns, updated_ns, fence, attempts, owner, job, host)
			WHERE j.id = u.id::uuid`,
		finishMany: `UPDATE {schema}.jobs AS j SET state = u.state, next_run_ns = u.next_run_ns, updated_ns = u.updated_ns,
				fence = u.fence, attempts = u.attempts, owner = u.owner, job = u.job, host = u.host
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::bytea[], $9::text[],
					$10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::bigint[])
				AS u(id, state, next_run_ns, updated_ns, fence, attempts, owner, job, host, c_fence, c_attempts, c_owner, c_state, c_sort)
			WHERE j.id = u.id::uuid AND j.fence = u.c_fence AND j.attempts = u.c_attempts AND j.owner = u.c_owner
				AND j.state IN ('running', 'unknown') AND j.state = u.c_state AND j.sort_ns = u.c_sort
			RETURNING j.id::text`,

		jobByID:       `SELECT job FROM {schema}.jobs WHERE id = $1`,
		jobByIDLocked: `SELECT job FROM {schema}.jobs WHERE id = $1 FOR UPDATE`,
		jobByKey:      `SELECT job FROM {schema}.jobs WHERE key = $1`,
		jobExists:     `SELECT EXISTS (SELECT 1 FROM {schema}.jobs WHERE id = $1)`,
		tombByKey:     `SELECT job_id::text, updated_ns FROM {schema}.key_tombs WHERE key = $1`,
		tombsByKeys:   `SELECT key, job_id::text, updated_ns FROM {schema}.key_tombs WHERE key = ANY($1)`,
		deleteJobs:    `DELETE FROM {schema}.jobs WHERE id = ANY($1)`,

		// Claims order by the table's id (j.id), not by the id::text
		// selected: that order is the index's, so the rows are read and
		// locked in index order with no sort. Skipped hosts are passed
		// over on the host column.
		due: `SELECT j.id::text, j.job FROM {schema}.jobs j WHERE j.state = $1 AND j.sort_ns <= $2 AND NOT (j.id = ANY($3)) AND j.host <> ALL($5)
			ORDER BY j.sort_ns, j.id LIMIT $4 FOR UPDATE SKIP LOCKED`,
		// The earliest due job of each claimable state, each through the
		// index; the caller takes the earlier of the two.
		nextDue: `WITH p AS (SELECT j.id::text, j.state, j.sort_ns, j.job FROM {schema}.jobs j WHERE j.state = 'pending' AND j.sort_ns <= $1 AND j.host <> ALL($2)
				ORDER BY j.sort_ns, j.id LIMIT 1 FOR UPDATE SKIP LOCKED),
			u AS (SELECT j.id::text, j.state, j.sort_ns, j.job FROM {schema}.jobs j WHERE j.state = 'unknown' AND j.sort_ns <= $1 AND j.host <> ALL($2)
				ORDER BY j.sort_ns, j.id LIMIT 1 FOR UPDATE SKIP LOCKED)
			SELECT * FROM p UNION ALL SELECT * FROM u`,
		// Up to $2 due jobs of each claimable state, for a group of
		// finishes that each claim one; each finish's own skipped hosts
		// are passed over in Go.
		nextDueN: `WITH p AS (SELECT j.id::text, j.state, j.sort_ns, j.job FROM {schema}.jobs j WHERE j.state = 'pending' AND j.sort_ns <= $1
				ORDER BY j.sort_ns, j.id LIMIT $2 FOR UPDATE SKIP LOCKED),
			u AS (SELECT j.id::text, j.state, j.sort_ns, j.job FROM {schema}.jobs j WHERE j.state = 'unknown' AND j.sort_ns <= $1
				ORDER BY j.sort_ns, j.id LIMIT $2 FOR UPDATE SKIP LOCKED)
			SELECT * FROM p UNION ALL SELECT * FROM u`,

		leaseExpires: `SELECT expires_ns FROM {schema}.runners WHERE id = $1`,
		register:     `INSERT INTO {schema}.runners (id, info, started_ns, expires_ns) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		heartbeat:    `UPDATE {schema}.runners SET expires_ns = $3 WHERE id = $1 AND expires_ns > $2`,
		deregister:   `DELETE FROM {schema}.runners WHERE id = $1`,
		leases:       `SELECT id, info, started_ns, expires_ns FROM {schema}.runners ORDER BY started_ns, id`,
		dropExpired:  `DELETE FROM {schema}.runners WHERE expires_ns <= $1`,
		rescuable: `SELECT id::text, job FROM {schema}.jobs j WHERE state = 'running'
			AND NOT EXISTS (SELECT 1 FROM {schema}.runners r WHERE r.id = j.owner AND r.expires_ns > $1)
			AND NOT (id = ANY($2)) ORDER BY sort_ns, id LIMIT $3 FOR UPDATE`,
		advisoryXact: `SELECT pg_advisory_xact_lock($1)`,

		releaseTombs: `DELETE FROM {schema}.key_tombs WHERE key IN (SELECT key FROM {schema}.key_tombs WHERE updated_ns < $1
			ORDER BY updated_ns, job_id LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		sweep: `DELETE FROM {schema}.jobs WHERE id IN (SELECT id FROM {schema}.jobs WHERE state = $1 AND sort_ns < $2
			ORDER BY sort_ns, id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING key, id::text, updated_ns`,
		insertTombs: `INSERT INTO {schema}.key_tombs (key, job_id, updated_ns) SELECT * FROM unnest($1::text[], $2::uuid[], $3::bigint[])
			ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, updated_ns = excluded.updated_ns`,

		stats:  `SELECT state, count(*) FROM {schema}.jobs GROUP BY state`,
		oldest: `SELECT sort_ns FROM {schema}.jobs WHERE state = $1 ORDER BY sort_ns, id LIMIT 1`,

		names:    `SELECT name, value FROM {schema}.meta WHERE name = ANY($1)`,
		lockMeta: `LOCK TABLE {schema}.meta IN SHARE ROW EXCLUSIVE MODE`,
		putMeta:  `INSERT INTO {schema}.meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,

		checkJobs:     `SELECT ` + jobCols + `, sort_ns FROM {schema}.jobs ORDER BY id`,
		checkTombKeys: `SELECT t.key, j.id::text FROM {schema}.key_tombs t JOIN {schema}.jobs j ON j.key = t.key`,
		checkTombIDs:  `SELECT t.key, t.job_id::text FROM {schema}.key_tombs t JOIN {schema}.jobs j ON j.id = t.job_id`,
		runners:       `SELECT id, info FROM {schema}.runners ORDER BY id`,

		// Hosts in byte order, as store/bolt keeps them, whatever the
		// database's collation.
		hostPolicies: `SELECT host, policy FROM {schema}.hosts ORDER BY host COLLATE "C"`,
		// A placeholder row, so a host without a policy is locked too;
		// an update stores over it, a rollback takes it away.
		hostReserve: `INSERT INTO {schema}.hosts (host, policy) VALUES ($1, 'null') ON CONFLICT DO NOTHING`,
		hostLocked:  `SELECT policy FROM {schema}.hosts WHERE host = $1 FOR UPDATE`,
		hostPut:     `UPDATE {schema}.hosts SET policy = $2 WHERE host = $1`,
		hostDelete:  `DELETE FROM {schema}.hosts WHERE host = $1`,
		hostCounts: `SELECT host, count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'unknown'),
			count(*) FILTER (WHERE sort_ns <= $1) FROM {schema}.jobs WHERE state IN ('pending', 'unknown')
			GROUP BY host ORDER BY host COLLATE "C"`,
	}
	for _, p := range q.all() {
		*p = r.Replace(*p)
	}
	return q
}

// all lists every statement, for newQueries to fill in the schema.
func (q *queries) all() []*string {
	return []*string{
		&q.insert, &q.update, &q.finish, &q.updateMany, &q.finishMany,
		&q.jobByID, &q.jobByIDLocked, &q.jobByKey, &q.jobExists,
		&q.tombByKey, &q.tombsByKeys, &q.deleteJobs,
		&q.due, &q.nextDue, &q.nextDueN,
		&q.leaseExpires, &q.register, &q.heartbeat, &q.deregister,
		&q.leases, &q.dropExpired, &q.rescuable, &q.advisoryXact,
		&q.releaseTombs, &q.sweep, &q.insertTombs,
		&q.stats, &q.oldest,
		&q.names, &q.lockMeta, &q.putMeta,
		&q.checkJobs, &q.checkTombKeys, &q.checkTombIDs, &q.runners,
		&q.hostPolicies, &q.hostReserve, &q.hostLocked,
		&q.hostPut, &q.hostDelete, &q.hostCounts,
	}
}
