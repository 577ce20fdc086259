package runner

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// Config configures a Runner. Every zero field takes the default its comment
// states.
type Config struct {
	// Workers is the number of jobs worked at once. Defaults to
	// DefaultWorkers.
	Workers int
	// ID names this runner instance: it is recorded as the owner of every
	// job it claims, and its lease (store.Work) says whether it is alive.
	// Defaults to a new id (store.NewID) for every Runner.
	ID string
	// LeaseTTL is how long the runner's lease lasts without a heartbeat;
	// it heartbeats every third of it, and looks for the running jobs of
	// runners whose lease expired as often. Defaults to DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Now is the clock that schedules and leases are judged by. Defaults
	// to the store's when it keeps one (store.Clock: a database shared by
	// many machines), else time.Now.
	Now func() time.Time
	// Rand is the jitter source. Defaults to one seeded from crypto/rand, so
	// two processes draw different delays. The runner locks around it.
	Rand *rand.Rand
	// Doer sends attempts. Defaults to NewHTTPClient(MaxConnsPerHost), or
	// NewNetHTTPClient with NetHTTP. A custom Doer must not follow
	// redirects and must not resend requests by itself.
	Doer Doer
	// NetHTTP makes the default Doer use net/http's Transport instead of
	// the runner's own HTTP/1.1 transport (NewNetHTTPClient). Ignored when
	// Doer is set.
	NetHTTP bool
	// MaxConnsPerHost caps the default Doer's connections to one host (one
	// scheme, host and port); attempts beyond it wait for a free connection.
	// Thousands of connections to one API are rude to it (rate limits
	// follow) and, on a small machine, cost more CPU per request than they
	// add in concurrency. Defaults to min(Workers, 128); negative means no
	// limit. Ignored when Doer is set.
	MaxConnsPerHost int
	// Checker answers status queries. When nil, jobs with a status URL are
	// checked by a statusquery.HTTPChecker and jobs without one are not
	// checked. When set, it is asked about every unknown job.
	Checker statusquery.Checker
	// HTTPChecker checks jobs that have a status URL when Checker is nil.
	// Defaults to a statusquery.HTTPChecker with its own defaults (5 s per
	// query, 64 KiB body cap).
	HTTPChecker *statusquery.HTTPChecker
	// QueryTimeout bounds one call of a custom Checker (its context is
	// canceled after it). Defaults to 5 seconds.
	QueryTimeout time.Duration
	// Backoff is the delay between attempts. Defaults to full jitter, base
	// 250 ms, cap 30 s.
	Backoff Backoff
	// StatusBackoff is the delay between status queries of one job.
	// Defaults to full jitter, base 1 s, cap 30 s.
	StatusBackoff Backoff
	// RetryAfterCap is the longest Retry-After the runner will wait; a longer
	// one stops the job with the last error. Defaults to 5 minutes.
	RetryAfterCap time.Duration
	// QuietPeriod is how long an unknown job waits before its first status
	// query (the original may still be processing). Defaults to 2 seconds.
	QuietPeriod time.Duration
	// Settle is the settle window of a host whose own policy and the
	// default policy (store.DefaultHost) set none: a status answer of
	// "not found" leads to a replay only once it was given at least
	// Settle after the attempt started. It does not apply to a job whose
	// replays are safe (a key TTL, a safe method, ReplaySafe). Defaults
	// to DefaultSettle; negative for none.
	Settle time.Duration
	// StatusBudget is the most status queries per unknown episode.
	// Defaults to 20.
	StatusBudget int
	// StatusGrace is how long past the job's deadline status queries go on.
	// Defaults to 1 hour.
	StatusGrace time.Duration
	// KeyTTLMargin is subtracted from a job's key TTL before a replay
	// without a status query. Defaults to 1 minute.
	KeyTTLMargin time.Duration
	// BodyLimit caps the response body kept per attempt. Defaults to 64 KiB;
	// values above MaxBodyLimit are taken as MaxBodyLimit.
	BodyLimit int64
	// PollInterval is the longest the scheduler sleeps when it sees no due
	// work. Defaults to 1 second.
	PollInterval time.Duration
	// StartupSpread is how long after start the scheduler ramps up claims,
	// so overdue jobs after a restart are spread out, not fired in one
	// burst. Recovered jobs get their first status query spread over it as
	// well. Defaults to 2 seconds.
	StartupSpread time.Duration
	// ClaimRounds is how many claim rounds may wait for their commit at
	// once. Defaults to 4.
	ClaimRounds int
	// ClaimBatch is the most jobs one claim round takes. Defaults to 32.
	// With jobs claimed ahead (ClaimAhead), a round takes up to a quarter
	// of Workers+ClaimAhead when that is more.
	ClaimBatch int
	// ClaimAhead applies to a store that commits outcomes later
	// (store.FinishLater): how many jobs beyond Workers the runner may
	// hold claimed ahead of a free worker, so a worker's next send waits
	// on no commit. Each holds a claim (a lease and an attempt) and counts
	// against its host's concurrency from its claim. Jobs sent and
	// waiting for their outcome's commit take no slot, up to
	// Workers+ClaimAhead of them. Defaults to Workers; negative means
	// none.
	ClaimAhead int
	// ShutdownGrace is how long in-flight attempts may run after Run's
	// context is canceled before they are canceled too. Defaults to 10 s.
	ShutdownGrace time.Duration
	// UntilIdle makes Run return nil once no job is pending, running or
	// unknown.
	UntilIdle bool
	// Logger receives structured logs, never header values or bodies: at
	// info, one line per job that ends or needs a person (its id, key,
	// state, attempts, the time since enqueue, and the reason and last
	// error when it did not succeed), recoveries, and a summary every
	// SummaryInterval while busy; at debug, one line per attempt and
	// status query. Defaults to slog.Default() (info and above, to
	// standard error, unless the program set another default). To log
	// nothing, give slog.New(slog.DiscardHandler).
	Logger *slog.Logger
	// SummaryInterval is how often a busy runner logs how many jobs ended
	// in each state meanwhile. Defaults to DefaultSummaryInterval.
	SummaryInterval time.Duration
	// OnWrite, when set, is called after every durable write a worker makes
	// (tests wait on it instead of sleeping).
	OnWrite func(j *store.Job)
	// OnEvent, when set, is called after a worker's durable write that
	// added or closed a history event (an attempt ended, a status query
	// answered), with that event: once per event, unlike OnWrite, which
	// also sees writes that only park or reschedule a job. Metrics count
	// with it. For the same write it is called before OnWrite, so a
	// test that waits on OnWrite sees the metrics of that write.
	OnEvent func(j *store.Job, e store.Event)
	// Redact scrubs secrets from error texts before they are stored.
	// Defaults to the identity function.
	Redact func(j *store.Job, s string) string
	// CheckSend, when set, is called before every send; an error stops the
	// attempt before any byte leaves. An error matching ErrNotAllowed (the
	// target may never be sent to) is a permanent failure; any other (a
	// resolver that failed or timed out, a canceled context) is a no-effect
	// outcome, retried like a refused connection. The host allowlist plugs
	// in here.
	CheckSend func(ctx context.Context, j *store.Job) error
	// CheckQuery, when set, is called before every status query; an error
	// means the query is not sent and counts as no answer (asked again
	// later, under the status budget, so a host that stays refused ends in
	// needs_attention). The host allowlist plugs in here.
	CheckQuery func(ctx context.Context, j *store.Job) error
	// DialControl, when set, is called for every connection the default
	// Doer and the default HTTP checker dial, with the address DNS
	// resolved to (net.Dialer.Control); an error refuses the connection
	// before anything is sent. The host allowlist uses it so a name that
	// resolves to a forbidden address at dial time, not only when
	// CheckSend looked, is refused. It also goes to an HTTPChecker given
	// without a Doer or DialControl of its own. Nil means none. Through a
	// proxy (HTTP_PROXY, HTTPS_PROXY) it sees the proxy's address only, not
	// the target's: CheckSend's lookup is then the only check of the target.
	DialControl func(network, address string, c syscall.RawConn) error
	// TLSConfig, when set, is the TLS configuration the default Doer and
	// the default HTTP checker start from for https targets: RootCAs for
	// targets behind a private CA, Certificates (or GetClientCertificate)
	// for targets that require a client certificate (mTLS). It is cloned
	// when the runner is built (New); MinVersion is raised to TLS 1.2 if
	// lower, attempts offer HTTP/1.1 alone, and ServerName is the target's
	// host unless set. A copy also goes to an HTTPChecker given without a
	// Doer or TLSConfig of its own. Its roots and client certificate serve
	// every https host the jobs name, their status URLs and an https proxy:
	// crypto/tls presents the certificate to any server that asks for one.
	// Nil means the system's roots and no client certificate.
	TLSConfig *tls.Config

	// PolicyReload is how often the host policies (store.Hosts) and the
	// count of live runners are read again. Defaults to
	// DefaultPolicyReload.
	PolicyReload time.Duration
	// HostShare is the share of the workers a host whose sends time out
	// or fail to connect may hold at once; answered sends earn the rest
	// back one answer at a time. (A host new to the runner starts at half
	// of the workers.)
	// Defaults to DefaultHostShare.
	HostShare float64
	// BreakerFailures is how many failed sends in a row to one host open
	// its breaker. Defaults to DefaultBreakerFailures.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker sends nothing before
	// one probe; it doubles with each failed probe up to
	// BreakerMaxCooldown. Default DefaultBreakerCooldown and
	// DefaultBreakerMaxCooldown.
	BreakerCooldown, BreakerMaxCooldown time.Duration
	// ThrottleFloor is the lowest send rate (per second) back-pressure
	// lowers a host to. Defaults to DefaultThrottleFloor.
	ThrottleFloor float64
	// ThrottleLift is how long a throttled host must go without 429 or
	// 503 with Retry-After before its throttle ends. Defaults to
	// DefaultThrottleLift.
	ThrottleLift time.Duration
}

// trafficConfig is the part of c traffic control uses.
func (c *Config) trafficConfig() trafficConfig {
	return trafficConfig{
		workers:  c.Workers,
		senders:  c.Workers,
		reload:   c.PolicyReload,
		share:    c.HostShare,
		breaker:  breakerConfig{failures: c.BreakerFailures, cooldown: c.BreakerCooldown, cap: c.BreakerMaxCooldown},
		throttle: throttleConfig{floor: c.ThrottleFloor, lift: c.ThrottleLift},
		idle:     10 * c.PolicyReload,
	}
}

// DefaultMaxConnsPerHost is the default cap on connections to one host.
const DefaultMaxConnsPerHost = 128

// MaxBodyLimit is the largest Config.BodyLimit: 16 MiB of response body
// kept per attempt.
const MaxBodyLimit = 16 << 20

// DefaultDoer returns the Doer a Runner built with cfg sends attempts
// through when cfg.Doer is nil: the runner's own transport (net/http's with
// NetHTTP) with cfg's connection cap and its defaults. It has a
// CloseIdleConnections method.
func DefaultDoer(cfg Config) Doer {
	cfg.Doer = nil
	cfg.setDefaults()
	return cfg.Doer
}

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.ID == "" {
		c.ID = store.NewID()
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = NewSeededRand()
	}
	if c.MaxConnsPerHost == 0 {
		c.MaxConnsPerHost = min(c.Workers, DefaultMaxConnsPerHost)
	}
	if c.Doer == nil {
		newClient := newHTTPClient
		if c.NetHTTP {
			newClient = newNetHTTPClient
		}
		if c.MaxConnsPerHost > 0 {
			c.Doer = newClient(c.MaxConnsPerHost, c.MaxConnsPerHost, c.DialControl, c.TLSConfig)
		} else {
			// No limit: keep up to one idle connection per worker, so a
			// busy host does not see connections closed and reopened.
			c.Doer = newClient(0, c.Workers, c.DialControl, c.TLSConfig)
		}
	}
	if c.StatusBackoff.Base <= 0 {
		c.StatusBackoff.Base = DefaultStatusBackoffBase
	}
	if c.RetryAfterCap <= 0 {
		c.RetryAfterCap = DefaultRetryAfterCap
	}
	if c.QuietPeriod <= 0 {
		c.QuietPeriod = DefaultQuietPeriod
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.StatusBudget <= 0 {
		c.StatusBudget = DefaultStatusBudget
	}
	if c.StatusGrace <= 0 {
		c.StatusGrace = DefaultStatusGrace
	}
	if c.KeyTTLMargin <= 0 {
		c.KeyTTLMargin = DefaultKeyTTLMargin
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	// The body is kept in the job's record, rewritten at each state
	// change; and the limit plus one must not overflow when reading.
	c.BodyLimit = min(c.BodyLimit, MaxBodyLimit)
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.StartupSpread <= 0 {
		c.StartupSpread = DefaultStartupSpread
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.ClaimRounds <= 0 {
		c.ClaimRounds = DefaultClaimRounds
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = DefaultClaimBatch
	}
	if c.ClaimAhead == 0 {
		c.ClaimAhead = c.Workers
	}
	c.ClaimAhead = max(c.ClaimAhead, 0)
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.PolicyReload <= 0 {
		c.PolicyReload = DefaultPolicyReload
	}
	if c.HostShare <= 0 || c.HostShare > 1 {
		c.HostShare = DefaultHostShare
	}
	if c.BreakerFailures <= 0 {
		c.BreakerFailures = DefaultBreakerFailures
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	if c.BreakerMaxCooldown <= 0 {
		c.BreakerMaxCooldown = DefaultBreakerMaxCooldown
	}
	c.BreakerMaxCooldown = max(c.BreakerMaxCooldown, c.BreakerCooldown)
	if c.ThrottleFloor <= 0 {
		c.ThrottleFloor = DefaultThrottleFloor
	}
	if c.ThrottleLift <= 0 {
		c.ThrottleLift = DefaultThrottleLift
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SummaryInterval <= 0 {
		c.SummaryInterval = DefaultSummaryInterval
	}
	if c.Redact == nil {
		c.Redact = func(_ *store.Job, s string) string { return s }
	}
}
