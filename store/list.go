package store

// MaxListLimit is the largest page List returns.
const MaxListLimit = 10000

// ListFilter selects jobs for List.
type ListFilter struct {
	// States limits the list to jobs in these states; empty means all.
	States []State
	// Limit is the page size. Defaults to 100; at most MaxListLimit.
	Limit int
	// Cursor continues a previous page (ListPage.Next); empty starts at the
	// beginning. Without States, pages walk job ids, which never change: a
	// job is on exactly one page. With States, pages walk each state's
	// index, ordered by next_run_at (pending, unknown) or updated_at (the
	// others): a job rescheduled between two pages without leaving its
	// state (an unknown job leased for its status query, say) moves across
	// the cursor and may be skipped or shown twice.
	Cursor string
	// Oldest lists the first jobs of each state's index instead of the
	// newest: the earliest next_run_at for pending and unknown, the least
	// recently updated for the others. It needs States; its pages continue
	// with the Next of an Oldest page.
	Oldest bool
}

// ListPage is one page of List.
type ListPage struct {
	Jobs []*Job
	// Next is the cursor of the following page, empty on the last one.
	Next string
}

// CheckReport is what Check found.
type CheckReport struct {
	Jobs     int
	Problems []string
}

// OK reports whether Check found nothing wrong.
func (r CheckReport) OK() bool { return len(r.Problems) == 0 }
