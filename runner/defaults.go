package runner

import "time"

// The defaults of Config's zero fields. The CLI's flags default to them
// too, so each is stated here once.
const (
	DefaultWorkers            = 16
	DefaultLeaseTTL           = 30 * time.Second
	DefaultBackoffBase        = 250 * time.Millisecond
	DefaultBackoffCap         = 30 * time.Second
	DefaultStatusBackoffBase  = time.Second
	DefaultRetryAfterCap      = 5 * time.Minute
	DefaultQuietPeriod        = 2 * time.Second
	DefaultSettle             = 30 * time.Second
	DefaultStatusBudget       = 20
	DefaultStatusGrace        = time.Hour
	DefaultKeyTTLMargin       = time.Minute
	DefaultBodyLimit          = 64 << 10
	DefaultPollInterval       = time.Second
	DefaultStartupSpread      = 2 * time.Second
	DefaultQueryTimeout       = 5 * time.Second
	DefaultClaimRounds        = 4
	DefaultClaimBatch         = 32
	DefaultShutdownGrace      = 10 * time.Second
	DefaultPolicyReload       = time.Second
	DefaultHostShare          = 0.25
	DefaultBreakerFailures    = 5
	DefaultBreakerCooldown    = 2 * time.Second
	DefaultBreakerMaxCooldown = 2 * time.Minute
	DefaultThrottleFloor      = 1.0
	DefaultThrottleLift       = time.Minute
)
