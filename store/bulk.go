package store

// MaxBulkJobs bounds the jobs one bulk action takes in: MatchIDs is asked
// for at most this many.
const MaxBulkJobs = 100000

// MaxBulkBatch bounds the jobs one ManualMany changes in one transaction.
const MaxBulkBatch = 500
