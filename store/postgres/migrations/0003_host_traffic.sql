-- Each runner's recent figures of the hosts it sends to
-- (store.HostTraffic), replaced at each heartbeat of its lease, so a
-- command on any node sums them over the live runners. A runner's rows go
-- with its lease.
CREATE TABLE {schema}.host_traffic (
	runner        text   NOT NULL REFERENCES {schema}.runners (id) ON DELETE CASCADE,
	host          text   NOT NULL,
	in_flight     int    NOT NULL,
	send_rate     float8 NOT NULL,
	recent_429    bigint NOT NULL,
	recent_5xx    bigint NOT NULL,
	timeouts      bigint NOT NULL,
	breaker       text   NOT NULL,
	throttled     bool   NOT NULL,
	rate          float8 NOT NULL,
	updated_ns    bigint NOT NULL,
	PRIMARY KEY (runner, host)
);
