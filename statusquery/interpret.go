package statusquery

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// utf8BOM is skipped before a body is parsed: RFC 8259 §8.1 lets a parser
// ignore it, and a status of "failed" behind a BOM must not read as "found".
const utf8BOM = "\xEF\xBB\xBF"

// Interpret maps a status answer onto an Outcome and a short detail,
// following ARCHITECTURE.md §5. It is a pure function; truncated reports that body is
// only the first part of a longer answer.
//
//   - 404, 410: NotFound.
//   - 2xx, body over the cap: only what the prefix proves. A top-level
//     status or state with an in-progress word before the cut: InProgress
//     (it only delays); a second item of a top-level list before the cut:
//     Duplicate; anything else NoAnswer, for a member further on could say
//     failed, repeat a member, or (after an object's "data" list) carry the
//     status that decides.
//   - 2xx, JSON object whose "status" or "state" string (trimmed, ASCII
//     case-insensitive, "-" and " " read as "_") is pending, processing,
//     in_progress (also inprogress), running, queued or accepted: InProgress.
//   - otherwise, such a string is failed, declined, rejected, canceled,
//     cancelled or error: FoundFailed.
//   - otherwise, a JSON array, or an object whose "data" member is an array:
//     0 items NotFound, more than 1 Duplicate, exactly 1 that item's own
//     status/state read as above; an item that is null, says not found,
//     has a null data and no word, or has a data list is NoAnswer; else
//     FoundSucceeded.
//   - any other 2xx (empty, not JSON, a scalar, status not a string or not
//     in either set): FoundSucceeded.
//   - 1xx, 3xx, 409, 429, other 4xx, 5xx, and codes outside 100-599:
//     NoAnswer.
//
// The rows are tried in that order, so an object naming both an in-progress
// and a failed word is InProgress, the answer that only delays. Member names
// match ASCII case-insensitively; an object that repeats status, state or
// data is ambiguous (parsers disagree on which copy wins) and gives NoAnswer.
func Interpret(status int, body []byte, truncated bool) (Outcome, string) {
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		return NotFound, statusDetail(status)
	case status >= 200 && status <= 299:
		return interpretBody(body, truncated)
	case status >= 300 && status <= 399:
		return NoAnswer, statusDetail(status) + ", redirect not followed"
	case status >= 100 && status <= 599:
		return NoAnswer, statusDetail(status)
	default:
		return NoAnswer, "invalid HTTP status " + strconv.Itoa(status)
	}
}

// statusDetail formats a status code as "404 not found".
func statusDetail(status int) string {
	text := strings.ToLower(http.StatusText(status))
	if text == "" {
		return strconv.Itoa(status)
	}
	return strconv.Itoa(status) + " " + text
}

// interpretBody reads the body of a 2xx answer.
func interpretBody(body []byte, truncated bool) (Outcome, string) {
	if truncated {
		return interpretPrefix(bytes.TrimPrefix(body, []byte(utf8BOM)))
	}
	b := trimJSONSpace(bytes.TrimPrefix(body, []byte(utf8BOM)))
	if len(b) == 0 {
		return FoundSucceeded, "empty body"
	}
	if !json.Valid(b) {
		return FoundSucceeded, "not JSON"
	}
	switch b[0] {
	case '{':
		o, err := parseObject(b)
		if err != nil {
			return FoundSucceeded, "not JSON"
		}
		return o.outcome(false)
	case '[':
		return interpretList(b)
	case '"':
		return FoundSucceeded, "JSON string"
	case 't', 'f':
		return FoundSucceeded, "JSON boolean"
	case 'n':
		return NoAnswer, "JSON null"
	default:
		return FoundSucceeded, "JSON number"
	}
}

// interpretPrefix reads the first part of a 2xx answer longer than the
// cap, as far as its JSON tokens go.
func interpretPrefix(prefix []byte) (Outcome, string) {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	tok, err := dec.Token()
	if err != nil {
		return NoAnswer, "body over cap, not JSON before the cut"
	}
	// items counts the values begun directly inside the top-level array
	// (listDepth 1; 0 for an object, whose "data" list proves nothing
	// while a status member may follow it).
	items, listDepth := 0, 0
	depth := 1
	topObject := tok == json.Delim('{')
	switch tok {
	case json.Delim('['):
		listDepth = 1
	case json.Delim('{'):
	default:
		return NoAnswer, "body over cap"
	}
	wantKey := topObject // at depth 1 of the top-level object
	member := ""         // the depth-1 member whose value comes next
	for {
		tok, err := dec.Token()
		if err != nil {
			return NoAnswer, "body over cap, no in-progress status before the cut"
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			depth--
			if depth == 1 && topObject {
				wantKey = true
			}
			continue
		}
		if depth == 1 && topObject && wantKey {
			member, _ = tok.(string)
			wantKey = false
			continue
		}
		if depth == listDepth {
			if items++; items >= 2 {
				return Duplicate, "body over cap, at least 2 items before the cut"
			}
		}
		if depth == 1 && topObject {
			if str, ok := tok.(string); ok && (asciiEqualFold(member, "status") || asciiEqualFold(member, "state")) && classifyWord(str) == InProgress {
				return InProgress, "body over cap, " + strings.ToLower(member) + " " + quoteShort(str)
			}
		}
		if isDelim { // '{' or '['
			depth++
			continue
		}
		if depth == 1 && topObject {
			wantKey = true
		}
	}
}

// interpretList reads a JSON array: the list of operations found under the
// key. It is given only valid JSON.
func interpretList(raw []byte) (Outcome, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return FoundSucceeded, "not JSON"
	}
	var first json.RawMessage
	n := 0
	for dec.More() {
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			return FoundSucceeded, "not JSON"
		}
		if n == 0 {
			first = item
		}
		n++
	}
	switch n {
	case 0:
		return NotFound, "0 items"
	case 1:
	default:
		return Duplicate, strconv.Itoa(n) + " items"
	}
	item := trimJSONSpace(first)
	if string(item) == "null" {
		// As a top-level null: no evidence either way.
		return NoAnswer, "1 item, JSON null"
	}
	if len(item) == 0 || item[0] != '{' {
		return FoundSucceeded, "1 item"
	}
	o, err := parseObject(item)
	if err != nil {
		return FoundSucceeded, "1 item"
	}
	return o.outcome(true)
}

// outcome reads a JSON object of a 2xx answer: the whole answer, or
// (item) a list's one item, which is read the same way but for its own
// data list. The rows are ARCHITECTURE.md §5's, in order.
func (o object) outcome(item bool) (Outcome, string) {
	detail := func(d string) string {
		if item {
			return "1 item, " + d
		}
		return d
	}
	if o.repeated != "" {
		return NoAnswer, detail("ambiguous JSON: repeated " + strconv.Quote(o.repeated))
	}
	if out, d := o.verdict(); out != "" {
		return out, detail(d)
	}
	if isArray(o.data) {
		if item {
			// A list inside the one item: what it holds (failed,
			// pending, a duplicate) would decide, and a list of lists is
			// no status answer the protocol knows.
			return NoAnswer, "1 item whose data is a list"
		}
		return interpretList(o.data)
	}
	if notFoundWord(o) {
		return NoAnswer, detail(o.word() + " says not found")
	}
	if word := o.word(); word != "" {
		return FoundSucceeded, detail(word)
	}
	// Without a status word, a null data is what Go encodes an empty list
	// as: no evidence either way.
	if d := trimJSONSpace(o.data); string(d) == "null" {
		return NoAnswer, detail("data is null")
	}
	if item {
		return FoundSucceeded, "1 item"
	}
	return FoundSucceeded, "JSON object"
}

// object holds the members of a JSON object that the protocol reads.
type object struct {
	status, state, data json.RawMessage // nil when absent
	repeated            string          // a protocol member named twice
}

// parseObject collects the status, state and data members of a JSON object,
// matching names ASCII case-insensitively. Other members are skipped
// without being decoded, so numbers of any size never matter.
func parseObject(b []byte) (object, error) {
	var o object
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return o, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return o, err
		}
		var slot *json.RawMessage
		switch {
		case asciiEqualFold(name, "status"):
			slot = &o.status
		case asciiEqualFold(name, "state"):
			slot = &o.state
		case asciiEqualFold(name, "data"):
			slot = &o.data
		default:
			continue
		}
		if *slot != nil && o.repeated == "" {
			o.repeated = strings.ToLower(name)
		}
		*slot = v
	}
	return o, nil
}

// verdict applies the status/state rows of the table in order: in progress
// first, then failed. It returns "" when neither row matches.
func (o object) verdict() (Outcome, string) {
	fields := [...]struct {
		name string
		raw  json.RawMessage
	}{{"status", o.status}, {"state", o.state}}
	for _, want := range [...]Outcome{InProgress, FoundFailed} {
		for _, f := range fields {
			if s, ok := jsonString(f.raw); ok && classifyWord(s) == want {
				return want, f.name + " " + quoteShort(s)
			}
		}
	}
	return "", ""
}

// word describes the status or state string of an object read as found,
// or returns "" when it has neither.
func (o object) word() string {
	if s, ok := jsonString(o.status); ok {
		return "status " + quoteShort(s)
	}
	if s, ok := jsonString(o.state); ok {
		return "state " + quoteShort(s)
	}
	return ""
}

// classifyWord returns InProgress or FoundFailed for the words of ARCHITECTURE.md §5,
// and "" for any other word.
func classifyWord(v string) Outcome {
	switch normalizeWord(v) {
	case "pending", "processing", "in_progress", "inprogress", "running", "queued", "accepted":
		return InProgress
	case "failed", "declined", "rejected", "canceled", "cancelled", "error":
		return FoundFailed
	}
	return ""
}

// normalizeWord trims v, lowers ASCII letters and reads "-" and " " as "_",
// so "In Progress", "in-progress" and "IN_PROGRESS" are one word. Only ASCII
// is folded: a look-alike such as the Kelvin sign must not match.
func normalizeWord(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > len("in_progress") {
		return "" // longer than every word we know
	}
	b := []byte(v)
	for i, c := range b {
		switch {
		case 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		case c == '-' || c == ' ':
			b[i] = '_'
		}
	}
	return string(b)
}

// jsonString decodes raw when it is a JSON string; numbers, null, objects
// and arrays are not statuses.
func jsonString(raw json.RawMessage) (string, bool) {
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// isArray reports whether raw is a JSON array.
func isArray(raw json.RawMessage) bool {
	raw = trimJSONSpace(raw)
	return len(raw) > 0 && raw[0] == '['
}

// trimJSONSpace removes the whitespace JSON allows around a value.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// asciiEqualFold reports whether a and b are equal under ASCII case folding.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// maxQuoted bounds the quoted form of a body's word in a detail.
const maxQuoted = 32

// quoteShort quotes s for a detail, cutting s on a rune boundary until its
// quoted form (escapes included) fits in maxQuoted bytes plus the quotes, so
// a hostile body cannot make details long.
func quoteShort(s string) string {
	s = strings.TrimSpace(s)
	if q := strconv.Quote(s); len(q) <= maxQuoted+2 {
		return q
	}
	cut := min(len(s), maxQuoted)
	for { // each pass shortens s[:cut], so the loop ends
		for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if q := strconv.Quote(s[:cut]); len(q) <= maxQuoted+2 || cut == 0 {
			return q + "..."
		}
		cut--
	}
}

func notFoundWord(o object) bool {
	for _, raw := range []json.RawMessage{o.status, o.state} {
		if s, ok := jsonString(raw); ok {
			switch normalizeWord(s) {
			case "not_found", "notfound", "missing", "unknown", "none":
				return true
			}
		}
	}
	return false
}
