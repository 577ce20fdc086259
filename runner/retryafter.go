package runner

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter is the largest delay ParseRetryAfter returns: 100 years of
// 365 days (876,000h). Larger values, however they are written, clamp to it
// instead of overflowing time.Duration; any job's Retry-After cap or
// deadline is far shorter, so a clamped value still means "stop now".
const MaxRetryAfter = 100 * 365 * 24 * time.Hour

// raMaxSeconds is MaxRetryAfter in whole seconds; it is small enough
// (about 3.15e9) that n*10+9 never overflows int64 while n ≤ raMaxSeconds.
const raMaxSeconds = int64(MaxRetryAfter / time.Second)

// raRFC850WindowYears is how far ahead an RFC 850 two-digit year may point
// before RFC 9110 §5.6.7 moves it back a century.
const raRFC850WindowYears = 50

// ParseRetryAfter reads the Retry-After header values of one response
// (RFC 9110 §10.2.3) and returns the delay they ask for, relative to now.
//
// Each value is either delay-seconds (1*DIGIT: no sign, fraction, unit or
// inner space; surrounding spaces and tabs are trimmed) or an HTTP-date in
// any of the three forms http.ParseTime accepts (IMF-fixdate, RFC 850,
// asctime). An RFC 850 two-digit year more than 50 years ahead of now is
// read as the century before, as RFC 9110 §5.6.7 requires. A value is not
// split on commas: Retry-After is not a list, and a date contains a comma.
//
// Invalid and empty values are ignored; if no value is valid, ok is false
// and d is 0. A date in the past gives 0. Every result lies in
// [0, MaxRetryAfter]: huge numbers and far dates clamp, never wrap negative.
//
// When a response carries several valid values that disagree, the largest
// wins: Retry-After is a floor the server set, and retrying earlier than any
// of them could break it, while waiting longer never does.
func ParseRetryAfter(values []string, now time.Time) (d time.Duration, ok bool) {
	for _, v := range values {
		one, valid := raParseOne(v, now)
		if !valid {
			continue
		}
		if !ok || one > d {
			d = one
		}
		ok = true
	}
	return d, ok
}

// raParseOne parses a single Retry-After value.
func raParseOne(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if secs, ok := raParseSeconds(v); ok {
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if _, err := time.Parse(time.RFC850, v); err == nil {
		t = raRFC850Century(t, now)
	}
	// Time.Sub saturates at the Duration limits instead of overflowing.
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, MaxRetryAfter), true
}

// raParseSeconds parses 1*DIGIT, clamping at raMaxSeconds.
func raParseSeconds(v string) (int64, bool) {
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		// Keep scanning after clamping so that "999…9x" is still rejected.
		if n <= raMaxSeconds {
			n = n*10 + int64(c-'0')
		}
	}
	return min(n, raMaxSeconds), true
}

// raRFC850Century moves a two-digit-year date into the century RFC 9110
// §5.6.7 asks for: the latest year with those last two digits whose date is
// not more than 50 years after now. Go's fixed pivot (69→1969, 68→2068)
// matches that rule only for a now in 2018; today "70" means 2070, not 1970.
func raRFC850Century(t, now time.Time) time.Time {
	limit := now.AddDate(raRFC850WindowYears, 0, 0)
	// The largest year ≤ limit's year with t's last two digits.
	back := (limit.Year() - t.Year()) % 100
	if back < 0 {
		back += 100
	}
	t = t.AddDate(limit.Year()-back-t.Year(), 0, 0)
	if t.After(limit) {
		t = t.AddDate(-100, 0, 0)
	}
	return t
}
