package store

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxListLimit is the largest page List returns.
const MaxListLimit = 10000

// ListScan bounds the jobs one List passes over because they fail its
// Host, Since, Until, KeyPrefix or IDPrefix filter: a page that reaches it
// ends early, shorter than Limit, with a Next to go on from.
const ListScan = 20000

// ListSort orders a list.
type ListSort string

// The orders of a list.
const (
	// ListSortDefault: without States, job ids newest first; with States,
	// each state's index in turn, newest first (or oldest, with Oldest).
	ListSortDefault ListSort = ""
	// ListSortNextRun: earliest next_run_at first, within each state in
	// the order given; States are needed, pending or unknown ones only
	// (the states that have a next run).
	ListSortNextRun ListSort = "next_run"
	// ListSortUpdated: latest updated_at first, within each state in the
	// order given; States are needed, none pending or unknown (their
	// index is by next run).
	ListSortUpdated ListSort = "updated"
)

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
	// recently updated for the others. It needs States and the default
	// Sort; its pages continue with the Next of an Oldest page.
	Oldest bool

	// Host limits the list to jobs whose request URL has this host, as
	// HostOf names it; "" means all.
	Host string
	// Since and Until limit the list to jobs last updated in [Since,
	// Until); a zero time leaves that side open.
	Since, Until time.Time
	// KeyPrefix and IDPrefix limit the list to jobs whose idempotency key,
	// or id, begins with them; "" means all.
	KeyPrefix, IDPrefix string
	// Sort orders the list (ListSortDefault when empty).
	Sort ListSort
}

// Narrowed reports whether f filters on more than states: its pages may
// then end short of Limit (ListScan).
func (f ListFilter) Narrowed() bool {
	return f.Host != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.KeyPrefix != "" || f.IDPrefix != ""
}

// Matches reports whether j passes every filter of f, States included.
// Backends narrow with their indexes, then decide with Matches.
func (f ListFilter) Matches(j *Job) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, j.State):
		return false
	case f.Host != "" && HostOf(j.Request.URL) != f.Host:
		return false
	case !f.Since.IsZero() && j.UpdatedAt.Before(f.Since):
		return false
	case !f.Until.IsZero() && !j.UpdatedAt.Before(f.Until):
		return false
	case !strings.HasPrefix(j.Key, f.KeyPrefix), !strings.HasPrefix(j.ID, f.IDPrefix):
		return false
	}
	return true
}

// Walk is how a list walks its states' indexes: forwards (oldest first)
// or not, from f's Sort and Oldest. It refuses a sort the indexes cannot
// give: next_run over states without a next run, updated over pending or
// unknown, either without States or with Oldest.
func (f ListFilter) Walk() (oldest bool, err error) {
	if f.Sort == ListSortDefault {
		return f.Oldest, nil
	}
	if f.Sort != ListSortNextRun && f.Sort != ListSortUpdated {
		return false, fmt.Errorf("store: unknown list sort %q; accepted: %q, %q, or none", f.Sort, ListSortNextRun, ListSortUpdated)
	}
	if len(f.States) == 0 || f.Oldest {
		return false, fmt.Errorf("store: list sort %q needs a state filter and no oldest-first", f.Sort)
	}
	for _, s := range f.States {
		due := s == StatePending || s == StateUnknown
		if due != (f.Sort == ListSortNextRun) {
			return false, fmt.Errorf("store: list sort %q cannot order %s jobs; %s", f.Sort, s, SortStates(f.Sort))
		}
	}
	return f.Sort == ListSortNextRun, nil
}

// SortStates says which states a sort orders, for messages.
func SortStates(s ListSort) string {
	if s == ListSortNextRun {
		return "it orders pending and unknown jobs (sort updated orders the others)"
	}
	return "it orders running, succeeded, failed, needs_attention and canceled jobs (sort next_run orders pending and unknown)"
}

// IDRange returns the lowest and highest job ids (UUIDs, lowercase, with
// dashes) that begin with prefix; ok is false when no id can.
func IDRange(prefix string) (lo, hi string, ok bool) {
	const form = "00000000-0000-0000-0000-000000000000"
	if len(prefix) > len(form) {
		return "", "", false
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if form[i] == '-' {
			if c != '-' {
				return "", "", false
			}
		} else if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	high := strings.Map(func(r rune) rune {
		if r == '0' {
			return 'f'
		}
		return r
	}, form)
	return prefix + form[len(prefix):], prefix + high[len(prefix):], true
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
