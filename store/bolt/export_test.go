package bolt

// MarkClaiming marks id as being claimed by a claim round of db, as
// ClaimDue does while it prepares, and returns the unmark.
func MarkClaiming(db *DB, id string) (unmark func()) {
	db.mark(id)
	return func() { db.claiming.Delete(id) }
}
