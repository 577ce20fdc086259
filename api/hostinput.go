package api

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemrun/idemrun/store"
)

// Limits of a host policy's settings.
const (
	MaxHostRate        = 1e6 // requests per second
	MaxHostBurst       = 1000000
	MaxHostConcurrency = 10000
	MaxHostSettle      = time.Hour
)

// What the host settings accept, for error messages.
const (
	HostAccepted = "a host as the target URL names it: lowercase, with :port when the port is not the scheme's default " +
		"(api.example.com, 127.0.0.1:8080, [::1]:9000), without scheme, path or user; or * for the default policy"
	RateAccepted        = "a rate above zero such as 40/s, 100/m or 500/h (requests per second, minute or hour), at most 1000000/s"
	BurstAccepted       = "an integer from 1 to 1000000 (requests at once after a quiet spell)"
	ConcurrencyAccepted = "an integer from 1 to 10000 (requests in flight at once)"
	SettleAccepted      = "a duration from 0s to 1h, such as 6s or 500ms"
)

// ParseHost checks a policy's host and returns it as store.HostOf names
// hosts (lowercase): the host of the target or status URLs it applies
// to, with :port when the port is not the scheme's default, or
// store.DefaultHost ("*"). A URL, a path, a user, whitespace or a
// wildcard is refused with an *InvalidError.
func ParseHost(s string) (string, error) {
	if s == store.DefaultHost {
		return s, nil
	}
	bad := func(why string) error { return invalid("host", s, HostAccepted+why) }
	switch {
	case s == "" || len(s) > 300:
		return "", bad("")
	case !utf8.ValidString(s):
		return "", &InvalidError{Field: "host", Value: "(not valid UTF-8)", Accepted: HostAccepted}
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return "", bad(" (no spaces or control characters)")
	case strings.Contains(s, "://"):
		return "", bad(" (give the host alone, not a URL)")
	case strings.ContainsAny(s, "/?#"):
		return "", bad(" (no path, query or fragment)")
	case strings.Contains(s, "@"):
		return "", bad(" (no user)")
	case strings.Contains(s, "*"):
		return "", bad(" (* alone is the default policy; hosts take no wildcards)")
	}
	h := strings.ToLower(s)
	u, err := url.Parse("http://" + h + "/")
	if err != nil || u.Host != h || u.Hostname() == "" || strings.HasSuffix(h, ":") {
		return "", bad("")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return "", bad(" (a port from 1 to 65535)")
		}
	}
	// The name HostOf gives a URL of this host under one scheme or the
	// other: "x:80" names https://x:80, "x:443" http://x:443.
	if store.HostOf("http://"+h+"/") != h && store.HostOf("https://"+h+"/") != h {
		return "", bad("")
	}
	return h, nil
}

// ParseRate reads a rate as the CLI's --rate takes it, N/s, N/m or N/h
// (N a decimal number above zero), and returns it in requests per
// second.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(s, "/")
	per := map[string]float64{"s": 1, "m": 60, "h": 3600}[unit]
	digits := num != "" && strings.Count(num, ".") <= 1 && strings.Trim(num, "0123456789.") == "" && num != "."
	if !ok || per == 0 || !digits {
		return 0, invalid("rate", s, RateAccepted)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || n/per > MaxHostRate {
		return 0, invalid("rate", s, RateAccepted)
	}
	return n / per, nil
}

// FormatRate writes a rate in requests per second as ParseRate reads
// it, in the unit that shows it as a whole number when one does
// (100/m rather than 1.66667/s).
func FormatRate(perSecond float64) string {
	for _, u := range []struct {
		name string
		per  float64
	}{{"s", 1}, {"m", 60}, {"h", 3600}} {
		v := perSecond * u.per
		if r := math.Round(v); r >= 1 && math.Abs(v-r) <= 1e-9*v {
			return strconv.FormatFloat(r, 'f', -1, 64) + "/" + u.name
		}
	}
	return strconv.FormatFloat(perSecond, 'g', 6, 64) + "/s"
}

// checkRate refuses a rate in requests per second that ParseRate would
// not give.
func checkRate(r float64) error {
	if !(r > 0) || r > MaxHostRate || math.IsInf(r, 0) {
		return invalid("rate", fmt.Sprint(r), RateAccepted+" (given in requests per second)")
	}
	return nil
}

// Check reports the first setting out of bounds as an *InvalidError,
// for a caller that refuses bad input before it opens anything; SetHost
// checks too.
func (s HostSettings) Check() error { return s.check() }

// check refuses settings outside their limits.
func (s HostSettings) check() error {
	if s.Rate != nil {
		if err := checkRate(*s.Rate); err != nil {
			return err
		}
	}
	if s.Burst != nil && (*s.Burst < 1 || *s.Burst > MaxHostBurst) {
		return invalid("burst", strconv.Itoa(*s.Burst), BurstAccepted)
	}
	if s.Concurrency != nil && (*s.Concurrency < 1 || *s.Concurrency > MaxHostConcurrency) {
		return invalid("concurrency", strconv.Itoa(*s.Concurrency), ConcurrencyAccepted)
	}
	if s.Settle != nil && (*s.Settle < 0 || *s.Settle > MaxHostSettle) {
		return invalid("settle", s.Settle.String(), SettleAccepted)
	}
	return nil
}
