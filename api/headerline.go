package api

import (
	"fmt"
	"strconv"
	"strings"
)

// headerLineAccepted is what a header line may be, for refusals.
const headerLineAccepted = `"Name: value" (the name, a colon, the value) with a valid header name and no CR or LF`

// ParseHeaderLine parses a curl-style "Name: value" header line. A
// refusal shows at most the line's name (see shownHeaderName): a line
// written wrong (X-Api-Key=sk_…, Authorization Bearer sk_…) holds its
// credential right after it.
func ParseHeaderLine(line string) (Header, error) {
	name, value, ok := strings.Cut(line, ":")
	if !ok {
		acc := headerLineAccepted + " (no colon found"
		shown, rest := shownHeaderName(strings.TrimSpace(line))
		if shown != "" {
			acc += fmt.Sprintf(`; write "%s: VALUE"`, shown)
		}
		return Header{}, &InvalidError{Field: "header", Value: hiddenLine(shown, rest), Accepted: acc + ")"}
	}
	h := Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)}
	return h, validateHeader(h)
}

// shownHeaderName splits s into the part a refusal may show, its leading
// header name when it looks like one, and the number of bytes hidden
// after it. A name looks like one when it is letters, digits and hyphens,
// at most 64 bytes, and each hyphen-separated word is letters with at
// most a few digits at its end (X-B3-TraceId, Content-MD5, Sha256): a
// credential (sk_live_…, ghp_…, AKIA…7EXAMPLE, xoxb-1234-…) fails that,
// and is hidden whole.
func shownHeaderName(s string) (shown string, hidden int) {
	end := 0
	for end < len(s) && (isAlnum(s[end]) || s[end] == '-') {
		end++
	}
	if end < len(s) && s[end] == '_' || !looksLikeHeaderName(s[:end]) {
		return "", len(s)
	}
	return s[:end], len(s) - end
}

func looksLikeHeaderName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for w := range strings.SplitSeq(name, "-") {
		letters := 0
		for letters < len(w) && !isDigit(w[letters]) {
			letters++
		}
		if letters == 0 || letters > 24 || len(w)-letters > 4 || strings.IndexFunc(w[letters:], func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// hiddenLine is how a refused header line (or name) is shown: its name
// part quoted, and how much follows it unseen.
func hiddenLine(shown string, hidden int) string {
	switch {
	case hidden == 0:
		return strconv.Quote(shown)
	case shown == "":
		return fmt.Sprintf("(%d bytes, hidden: they may hold a credential)", hidden)
	default:
		return fmt.Sprintf("%s (and %d bytes after it, hidden: they may hold a credential)", strconv.Quote(shown+"…"), hidden)
	}
}
