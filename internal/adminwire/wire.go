// Package adminwire is the JSON of a runner's admin API that its two
// sides must agree on: paths, limits, error codes and the bodies around
// jobs.
//
// The two sides sit on either side of package api: the server (package
// admin) serves api.Client's operations, so it imports api; the client is
// api.Client itself, which api.Open hands out when a runner holds the
// store, so it cannot import the server. What both need lives here, below
// both. A body that carries jobs is generic over the job view (api.Job),
// which this package cannot name; the enqueue body itself is
// api.EnqueueSpec, the one enqueue schema.
package adminwire

// Limits of one request body.
const (
	// MaxBody bounds one admin request body (a 1 MiB job body is about
	// 1.4 MB once base64-encoded).
	MaxBody = 4 << 20
	// MaxBatchBody bounds a batch enqueue request body.
	MaxBatchBody = 64 << 20
	// MaxBatchJobs bounds the jobs of one batch enqueue.
	MaxBatchJobs = 100000
)

// Paths of the admin API.
const (
	PathHealth = "/v1/health"
	PathJobs   = "/v1/jobs" // POST enqueues, GET lists; /v1/jobs/{id} and /v1/jobs/{id}/{cancel,retry,resolve}
	PathBatch  = "/v1/jobs/batch"
	PathStats  = "/v1/stats"
	PathBackup = "/v1/backup"
	PathHosts  = "/v1/hosts" // GET lists; PUT and DELETE /v1/hosts/{host}; POST /v1/hosts/{host}/{pause,resume}
	PathBulk   = "/v1/bulk"  // POST: a bulk action over a filter
)

// Error codes of the admin API: stable, scripts may match on them.
const (
	CodeInvalid           = "invalid_input"
	CodeNotFound          = "not_found"
	CodeKeyConflict       = "key_conflict"
	CodeIllegalTransition = "illegal_transition"
	CodeUnauthorized      = "unauthorized"
	CodeTooLarge          = "too_large"
	CodeNotOffered        = "not_offered"
	CodeInternal          = "internal"
)

// Error is the body of an answer with a status of 300 or more.
type Error struct {
	Error Coded `json:"error"`
}

// Coded is an error with its stable code.
type Coded struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Steer is the body of a cancel, retry or resolve.
type Steer struct {
	As    string `json:"as,omitempty"`
	Actor string `json:"actor,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Enqueued is the answer to an enqueue.
type Enqueued[J any] struct {
	Job      J    `json:"job"`
	Existing bool `json:"existing"`
}

// Batch is the body of a batch enqueue.
type Batch[E any] struct {
	Jobs []E `json:"jobs"`
}

// Results is the answer to a batch enqueue: one item per job, in order.
type Results[J any] struct {
	Results []Item[J] `json:"results"`
}

// Item is one job's outcome in Results: the job, or why it was refused.
type Item[J any] struct {
	Job      J      `json:"job,omitempty"`
	Existing bool   `json:"existing,omitempty"`
	Error    *Coded `json:"error,omitempty"`
}

// HostSet is the body of a PUT of a host's policy: the limits to change,
// the others kept. Rate is in requests per second; Settle a duration as
// Go writes it ("6s").
type HostSet struct {
	Rate        *float64 `json:"rate,omitempty"`
	Burst       *int     `json:"burst,omitempty"`
	Concurrency *int     `json:"concurrency,omitempty"`
	Settle      *string  `json:"settle,omitempty"`
	Actor       string   `json:"actor,omitempty"`
}

// Hosts is the answer to a list of hosts.
type Hosts[H any] struct {
	Hosts []H `json:"hosts"`
}

// Bulk is the body of a bulk action: the filter (states required; since
// and until in RFC 3339), the action (retry, cancel, resolve), the state
// a resolve ends in, who and why, and whether only to count.
type Bulk struct {
	States    []string `json:"states"`
	Host      string   `json:"host,omitempty"`
	Since     string   `json:"since,omitempty"`
	Until     string   `json:"until,omitempty"`
	KeyPrefix string   `json:"key_prefix,omitempty"`
	IDPrefix  string   `json:"id_prefix,omitempty"`
	Action    string   `json:"action"`
	As        string   `json:"as,omitempty"`
	Actor     string   `json:"actor,omitempty"`
	Note      string   `json:"note"`
	DryRun    bool     `json:"dry_run,omitempty"`
}
