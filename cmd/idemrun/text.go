package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Text as the CLI prints it: shell words, terminal-safe free text,
// counts and durations.

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// trunc is free text (a target's answer, an error, a note) made fit for a
// terminal line: control characters escaped, then cut to about n bytes at
// a character boundary.
func trunc(s string, n int) string {
	s = printable(s)
	if len(s) <= n {
		return s
	}
	cut := n - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// printable escapes what a terminal would act on instead of showing:
// C0 and C1 control characters (escape sequences that clear the screen,
// retitle the window or move the cursor back over a line), DEL, the
// bidirectional overrides that reorder text, and invalid UTF-8. A target's
// answer or anyone's note must not be able to make a failed job look
// succeeded on screen.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if !showable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case showable(r):
			b.WriteString(s[i : i+n])
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

func showable(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return false // invalid UTF-8 decodes as this; a real U+FFFD is escaped too
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return false
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return false // bidirectional controls
	}
	return true
}

// plural is n with its noun: 1 query, 2 queries.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shortDuration is d as a flag takes it, without zero units: 10m, 720h.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "in " + (-d).Round(time.Second).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String() + " ago"
	default:
		return d.Round(time.Second).String() + " ago"
	}
}
