-- Traffic control per target host ({schema} is replaced by the quoted
-- schema name).

-- One row per host with a policy of its own ('*' for the default): the
-- whole store.HostPolicy as JSON, keyed by its host.
CREATE TABLE {schema}.hosts (
	host   text PRIMARY KEY,
	policy json NOT NULL
);

-- The host a claim of the job would send to (store.ClaimHost: the
-- target's for a pending job, the status URL's for an unknown one),
-- written with the job on every write, so claims pass over a paused or
-- throttled host's jobs without decoding them. The migration fills it
-- for the jobs it finds (in Go, as ClaimHost computes it).
ALTER TABLE {schema}.jobs ADD COLUMN host text NOT NULL DEFAULT '';
