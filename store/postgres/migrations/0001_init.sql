-- idemrun's tables, in their own schema ({schema} is replaced by the
-- quoted schema name). Times are Unix nanoseconds in bigint columns: the
-- store's times are exact to the nanosecond, timestamptz keeps
-- microseconds. The zero time is the smallest bigint, so it sorts first.

-- One row per job. The whole job is in "job" (store.Job's own JSON);
-- the other columns are copies of its fields that queries need, written
-- in the same statement.
CREATE TABLE {schema}.jobs (
	id          uuid   PRIMARY KEY,
	key         text   NOT NULL CONSTRAINT jobs_key UNIQUE,
	state       text   NOT NULL CONSTRAINT jobs_state CHECK (state IN
	            ('pending', 'running', 'unknown', 'succeeded', 'failed', 'needs_attention', 'canceled')),
	next_run_ns bigint NOT NULL,
	updated_ns  bigint NOT NULL,
	-- The time a job is ordered by within its state: when it is due for
	-- pending and unknown jobs (claims), its last update for the others
	-- (the claim time of running jobs, the end of ended ones: sweeps).
	sort_ns     bigint NOT NULL GENERATED ALWAYS AS
	            (CASE WHEN state IN ('pending', 'unknown') THEN next_run_ns ELSE updated_ns END) STORED,
	fence       bigint NOT NULL CONSTRAINT jobs_fence CHECK (fence >= 0),
	attempts    bigint NOT NULL,
	owner       text   NOT NULL,
	job         json   NOT NULL
);

-- Claims (due jobs of a state, oldest first), lists by state, sweeps,
-- rescues (the running jobs) and OldestDue all walk this index.
CREATE INDEX jobs_state_sort ON {schema}.jobs (state, sort_ns, id);

-- Keys of deleted jobs, reserved until a sweep's key cutoff passes the
-- job's last update, so a finished request is not sent again.
CREATE TABLE {schema}.key_tombs (
	key        text   PRIMARY KEY,
	job_id     uuid   NOT NULL,
	updated_ns bigint NOT NULL
);

CREATE INDEX key_tombs_updated ON {schema}.key_tombs (updated_ns, job_id);

-- Runner leases. info is the store.RunnerInfo beyond its id.
CREATE TABLE {schema}.runners (
	id         text   PRIMARY KEY,
	info       json   NOT NULL,
	started_ns bigint NOT NULL,
	expires_ns bigint NOT NULL
);

-- Small named values: the recorded sensitive names.
CREATE TABLE {schema}.meta (
	name  text PRIMARY KEY,
	value text NOT NULL
);
