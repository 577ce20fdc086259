package store

// EnqueueResult is the outcome of enqueuing one job.
type EnqueueResult struct {
	Job *Job
	// Existing is true when the key already held the same request; Job is
	// then the stored job and nothing was written.
	Existing bool
	// Err is a refusal for this job alone (EnqueueMany): a key conflict or
	// an invalid record.
	Err error
}
