package store

// SetCompactBeforeRename sets the hook Compact runs between writing its
// checked copy and renaming it over the database, and returns a func that
// clears it.
func SetCompactBeforeRename(fn func()) (reset func()) {
	compactBeforeRename = fn
	return func() { compactBeforeRename = nil }
}
