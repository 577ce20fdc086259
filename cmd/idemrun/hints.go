package main

import (
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// The store, the runner and the API speak their own terms (Check, Backup,
// "a person must resolve the job"); only the CLI knows its commands and
// flags, so it adds them where it prints an error or shows a job.

// resolveHint is the command that records a person's answer for a job in
// needs_attention, shown with the job (its reason says what to check, in
// the runner's terms).
func resolveHint(j *api.Job) string {
	if j.State != store.StateNeedsAttention {
		return ""
	}
	return "idemrun resolve " + shellQuote(j.ID) + " --as succeeded|failed --note TEXT"
}
