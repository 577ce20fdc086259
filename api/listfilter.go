package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/store"
)

// What the list filters accept, for error messages.
const (
	StatesAccepted   = "pending, running, unknown, succeeded, failed, needs_attention, canceled"
	IDPrefixAccepted = "the beginning of a job id: lowercase hex digits, with the dashes where a job id has them (0190c3a2-7b1e-…)"
	SortAccepted     = "next_run (earliest next run first; states pending, unknown) or updated (latest update first; states running, succeeded, failed, needs_attention, canceled)"
)

// maxPrefix bounds a key or id prefix.
const maxPrefix = 1024

// storeFilter checks f and returns it as the store takes it: states
// named once, the host as store.HostOf names hosts, the id prefix in
// lowercase. Each refusal is an *InvalidError naming the field.
func (c *Client) storeFilter(f ListFilter) (store.ListFilter, error) {
	if f.Limit < 0 || f.Limit > store.MaxListLimit {
		return store.ListFilter{}, invalid("limit", strconv.Itoa(f.Limit), fmt.Sprintf("an integer from 1 to %d", store.MaxListLimit))
	}
	for _, s := range f.States {
		if _, err := store.ParseState(string(s)); err != nil {
			return store.ListFilter{}, invalid("state", string(s), StatesAccepted)
		}
	}
	// A state named twice is listed once, where it first appears.
	sf := store.ListFilter{States: uniqueStates(f.States), Limit: f.Limit, Cursor: f.Cursor, Oldest: f.Oldest,
		Since: f.Since, Until: f.Until, KeyPrefix: f.KeyPrefix, Sort: f.Sort}
	if f.Cursor != "" {
		if cf, ok := c.st.(cursorChecker); ok && !cf.CursorFits(f.Cursor, sf.States) {
			return store.ListFilter{}, invalid("cursor", f.Cursor, "the next cursor of the previous page of the same list (the same state filters)")
		}
	}
	if f.Oldest && len(f.States) == 0 {
		return store.ListFilter{}, invalid("oldest", "true", "a state filter")
	}
	if f.Host != "" {
		h, err := ParseHost(f.Host)
		if err != nil {
			return store.ListFilter{}, err
		}
		if h == store.DefaultHost {
			return store.ListFilter{}, invalid("host", f.Host, HostAccepted[:strings.Index(HostAccepted, "; or *")])
		}
		sf.Host = h
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return store.ListFilter{}, invalid("until", f.Until.Format(time.RFC3339Nano), "a time after since ("+f.Since.Format(time.RFC3339Nano)+")")
	}
	if !utf8.ValidString(f.KeyPrefix) || len(f.KeyPrefix) > maxPrefix {
		return store.ListFilter{}, invalid("key_prefix", f.KeyPrefix, fmt.Sprintf("text in valid UTF-8, at most %d bytes", maxPrefix))
	}
	if f.IDPrefix != "" {
		p := strings.ToLower(f.IDPrefix)
		if _, _, ok := store.IDRange(p); !ok {
			return store.ListFilter{}, invalid("id_prefix", f.IDPrefix, IDPrefixAccepted)
		}
		sf.IDPrefix = p
	}
	if _, err := sf.Walk(); err != nil {
		if f.Sort != ListSortNextRun && f.Sort != ListSortUpdated {
			return store.ListFilter{}, invalid("sort", string(f.Sort), SortAccepted)
		}
		states := "running, succeeded, failed, needs_attention, canceled"
		if f.Sort == ListSortNextRun {
			states = "pending, unknown"
		}
		return store.ListFilter{}, invalid("sort", string(f.Sort), fmt.Sprintf("%s with a state filter of %s only, without oldest-first", f.Sort, states))
	}
	return sf, nil
}

// AgoAccepted is what ParseAgo accepts, for errors.
const AgoAccepted = "a time in RFC 3339 (2026-12-02T10:00:00Z, 2026-12-02T11:00:00+01:00) or how long ago as a duration (90m or -90m: 90 minutes ago; 2h, 30s)"

// ParseAgo reads a time of a list filter: RFC 3339, or a duration that
// long before now (with or without a leading minus: "2h" and "-2h" are
// both two hours ago).
func ParseAgo(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "-"))
	if err != nil || d <= 0 || strings.HasPrefix(s, "+") {
		return time.Time{}, fmt.Errorf("not a time or a duration ago: %q", s)
	}
	return now.Add(-d), nil
}
