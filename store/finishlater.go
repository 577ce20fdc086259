package store

// FinishLater is implemented by backends that can commit outcomes after
// the call that hands them over, several in one commit (Postgres). P3
// only needs a claim committed before its first byte is sent: an outcome
// committed later, or lost in a crash, leaves the job running under its
// claim, to be rescued into unknown and asked about, never sent again
// unasked.
type FinishLater interface {
	// FinishClaimLater checks the finish of c as FinishClaim does (fn is
	// called before it returns) and queues it; done is called once, from another goroutine, after its
	// commit (the job as written, nil) or its failure (nil and an error
	// as FinishClaim returns it: ErrFenced for a claim that no longer
	// holds the job, ErrCommitUnknown for a commit whose outcome is not
	// known, ...); it should return promptly. A returned error means
	// nothing was queued and done is never called. Close returns after
	// every queued finish's done has returned.
	FinishClaimLater(c Claim, fn TransitionFunc, done func(*Job, error)) error
}
