package postgres

import (
	"errors"
	"strings"
)

// checkUserInfo refuses a URL whose part before the host holds more than
// one @, as in postgres://u:p@ss@host/db. Go's URL parser takes the last @
// as the end of the password and the driver the first, so such a URL
// would reach another host than the one written, and the redactor, which
// reads it as Go does, would miss the part of the password after the
// first @. A keyword string (host=… password=…) has no such part.
func checkUserInfo(r redactor, raw string) error {
	i := strings.Index(raw, "://")
	if i < 0 {
		return nil
	}
	authority := raw[i+3:]
	if j := strings.IndexAny(authority, "/?#"); j >= 0 {
		authority = authority[:j]
	}
	if strings.Count(authority, "@") < 2 {
		return nil
	}
	return errors.New(r.scrub("store: the database URL " + r.location() +
		" has more than one @ before its host: write an @ in the user name or password as %40"))
}
