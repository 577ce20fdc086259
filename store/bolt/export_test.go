package bolt

// SetCompactBeforeRename sets the hook Compact runs between writing its
// checked copy and renaming it over the database, and returns a func that
// clears it.
func SetCompactBeforeRename(fn func()) (reset func()) {
	compactBeforeRename = fn
	return func() { compactBeforeRename = nil }
}

// MarkClaiming marks id as being claimed by a claim round of db, as
// ClaimDue does while it prepares, and returns the unmark.
func MarkClaiming(db *DB, id string) (unmark func()) {
	db.mark(id)
	return func() { db.claiming.Delete(id) }
}
