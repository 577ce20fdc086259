package main

import (
	"errors"
	"strings"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/postgres"
)

// The store, the runner and the API speak their own terms (Check, Backup,
// "a person must resolve the job"); only the CLI knows its commands and
// flags, so it adds them where it prints an error or shows a job.

// hint is the command or flag that acts on err, for the errors of the
// store that have one, or "".
func hint(err error) string {
	if fe, ok := errors.AsType[*bolt.FileError](err); ok {
		switch fe.Problem {
		case bolt.FileDamaged:
			return "run `idemrun check " + shellQuote(fe.Path) + "` to see what is damaged"
		case bolt.FileEmpty:
			return "enqueue a job (`idemrun enqueue`) to lay it out, or give another file with --db FILE"
		case bolt.FileIsDirectory:
			return "give a database file with --db FILE"
		}
	}
	if errors.Is(err, bolt.ErrNoDatabase) {
		return "enqueue a job (`idemrun enqueue`) to create it, or give another file with --db FILE"
	}
	return ""
}

// dbHint is what to do about a Postgres database that did not open.
func dbHint(db dbTarget, err error) string {
	switch {
	case errors.Is(err, postgres.ErrNoSchema):
		return "create or upgrade it with `idemrun migrate` and the same --db" + schemaFlag(db)
	case errors.Is(err, postgres.ErrNewerSchema):
		return "use the idemrun that migrated it, or a newer one"
	}
	return ""
}

// schemaFlag is the --schema flag that names db's schema, or "".
func schemaFlag(db dbTarget) string {
	if db.schema == "" {
		return ""
	}
	return " --schema " + shellQuote(db.schema)
}

// withHint is err's message with the CLI's hint for it, if it has one.
func withHint(err error) string {
	if h := hint(err); h != "" {
		return err.Error() + "; " + h
	}
	return err.Error()
}

// checkOpenHint is withHint for a file `idemrun check` could not open:
// without the hint to run check, which is what failed.
func checkOpenHint(err error) string {
	if fe, ok := errors.AsType[*bolt.FileError](err); ok && fe.Problem == bolt.FileDamaged {
		return err.Error()
	}
	return withHint(err)
}

// compactUnsupportedHint is what compact adds where the platform cannot
// rename the copy over the open file (bolt.Compact's errors.ErrUnsupported).
const compactUnsupportedHint = "copy the jobs with `idemrun backup OUT` instead"

// resolveHint is the command that records a person's answer for a job in
// needs_attention, shown with the job (its reason says what to check, in
// the runner's terms).
func resolveHint(j *api.Job) string {
	if j.State != store.StateNeedsAttention {
		return ""
	}
	return "idemrun resolve " + shellQuote(j.ID) + " --as succeeded|failed --note TEXT"
}

// flagHint names the flag behind a refusal of the lower layers, which
// speak their own terms (the allowlist, the job's key, a list cursor).
func flagHint(err error) string {
	ie, ok := errors.AsType[*api.InvalidError](err)
	if !ok {
		return ""
	}
	switch {
	case ie.Field == "url host":
		return " (the allowlist is --allow-host)"
	case ie.Field == "cursor":
		return " (the --cursor a list printed, with the same --state filters)"
	case strings.HasSuffix(ie.Field, "url") && strings.Contains(ie.Accepted, "put credentials in a header"):
		return " (-H 'Authorization: ...')"
	case ie.Field == "header name" && strings.Contains(ie.Accepted, "Idempotency-Key"):
		return " (give the key with --key)"
	}
	return ""
}
