package store

import "time"

// Claim is a job handed to a worker. Its outcome write is fenced: a backend
// refuses it (ErrFenced) unless the job is still held by this claim, the
// same fence, attempt and owner. Every claim and every rescue raises the
// job's fence, so a worker that lost its job can never overwrite a later
// claim's work.
type Claim struct {
	// Job is the job as the claim wrote it.
	Job *Job
	// Fence is Job.Fence after the claim.
	Fence uint64
	// Attempt is Job.Attempts after the claim: the attempt this claim
	// sends (or, for an unknown job, the attempt its status query is
	// about).
	Attempt int
	// Owner is the runner that holds the claim (ClaimRequest.Owner).
	Owner string
}

// ClaimOf returns the claim a backend hands out for j as just claimed.
func ClaimOf(j *Job) Claim {
	return Claim{Job: j, Fence: j.Fence, Attempt: j.Attempts, Owner: j.Owner}
}

// Fenced reports whether j, as stored now, is no longer held by c: a later
// claim or a rescue has raised the fence, or the attempt or the owner
// differ. Backends check it inside the transaction of a finish.
func (c Claim) Fenced(j *Job) bool {
	return j.Fence != c.Fence || j.Attempts != c.Attempt || j.Owner != c.Owner
}

// ClaimFunc prepares a claimed job: it sets what the claim records (the
// attempt event, a lease on next_run_at). It must not fail.
type ClaimFunc func(j *Job)

// ClaimRequest asks ClaimDue for due jobs.
type ClaimRequest struct {
	// State is the state claimed: pending (an attempt starts) or unknown
	// (a status query starts).
	State State
	// Now decides what is due (NextRunAt at or before it) and is recorded
	// as the claim's time.
	Now time.Time
	// Limit is the most jobs claimed.
	Limit int
	// Owner is the claiming runner's id (its lease, see Heartbeat),
	// recorded on each claimed job.
	Owner string
	// Prepare, when set, sees each claimed job before it is written.
	Prepare ClaimFunc
	// SkipHosts passes over due jobs whose ClaimHost is one of these
	// (paused, throttled, full), without reading each one's record where
	// the backend can avoid it: a host with many due jobs must not hold up
	// the others.
	SkipHosts []string
	// Admit, when set, is asked for each due job not skipped, with its
	// ClaimHost, before it is claimed; a job it refuses stays due and
	// unclaimed. A true answer is a promise the caller keeps (a token
	// spent), so it is asked only for a job that is then claimed, unless
	// the claim fails.
	Admit func(host string) bool
}

// NextClaim asks FinishClaim to claim one more due job in the
// transaction of the finish.
type NextClaim struct {
	// Now is the clock reading that decides what is due.
	Now time.Time
	// Owner is the claiming runner's id, as in ClaimRequest.
	Owner string
	// Pending prepares a claimed pending job, Unknown a claimed unknown
	// one, as ClaimRequest.Prepare does.
	Pending, Unknown ClaimFunc
	// SkipHosts and Admit are as in ClaimRequest.
	SkipHosts []string
	Admit     func(host string) bool
}

// TransitionFunc changes a loaded job (state, fields, history). Returning an
// error refuses the change; nothing is written.
type TransitionFunc func(j *Job) error
