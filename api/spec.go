package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/strictjson"
)

// WireHeader is a header line in JSON: a job view's headers, and the
// array form of an EnqueueSpec's headers.
type WireHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// EnqueueSpec is the one JSON form of an enqueue: a line of
// `idemrun enqueue --from` and the body of the admin API's POST /v1/jobs
// (and each job of its batch). DecodeEnqueue reads it; Parts turns it
// into a Request and its EnqueueOptions.
//
// Fields: url (required); method (default POST); headers, either an
// object of names to values (sent in the order of their names) or an
// array of {"name", "value"} objects (order and repeated names kept);
// header_lines, "Name: value" strings, sent after headers; the body as
// data (text) or body (any bytes, base64), not both; key, key_format
// ("token" or "structured"), status_url; key_ttl, deadline and
// attempt_timeout as duration strings ("15m"; a bare number is refused);
// max_attempts; replay_safe; no_effect_statuses (an array); run_at, an
// RFC 3339 time or a duration from now. A field given with an empty or
// zero value is refused: leave it out for the default. Unknown fields,
// a field given twice (names match without regard to case) and text that
// is not valid UTF-8 are refused.
//
// The admin API's earlier body (headers as an array, body in base64,
// run_at as an RFC 3339 time) is this schema too.
type EnqueueSpec struct {
	URL              string       `json:"url"`
	Method           string       `json:"method,omitempty"`
	Headers          []WireHeader `json:"headers,omitempty"` // decoded from either form; encoded as the array
	HeaderLines      []string     `json:"header_lines,omitempty"`
	Data             *string      `json:"data,omitempty"`
	Body             []byte       `json:"body,omitempty"` // base64 in JSON
	Key              string       `json:"key,omitempty"`
	KeyFormat        string       `json:"key_format,omitempty"`
	StatusURL        string       `json:"status_url,omitempty"`
	KeyTTL           Duration     `json:"key_ttl,omitempty"`
	MaxAttempts      int          `json:"max_attempts,omitempty"`
	Deadline         Duration     `json:"deadline,omitempty"`
	AttemptTimeout   Duration     `json:"attempt_timeout,omitempty"`
	ReplaySafe       bool         `json:"replay_safe,omitempty"`
	NoEffectStatuses []int        `json:"no_effect_statuses,omitempty"`
	RunAt            string       `json:"run_at,omitempty"`
}

// RunAtAccepted is what run_at accepts, for errors.
const RunAtAccepted = "a time in RFC 3339 (2026-12-24T09:00:00Z, 2026-12-24T10:00:00+01:00) or a positive duration from now (90s, 10m, 2h), before the job's deadline"

// ParseRunAt reads a first-attempt time: RFC 3339, or a positive duration
// after now.
func ParseRunAt(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("not a time or a positive duration: %q", s)
	}
	return now.Add(d), nil
}

// specFields is what each field of an EnqueueSpec accepts, for errors, in
// the order the schema lists them.
var specFields = []struct{ name, accepted string }{
	{"url", `a string: an absolute http:// or https:// URL`},
	{"method", `a string such as "POST"`},
	{"headers", `an object of header names to string values, or an array of {"name": …, "value": …} objects`},
	{"header_lines", `an array of "Name: value" strings`},
	{"data", `a string: the request body`},
	{"body", `a string: the request body's bytes in base64`},
	{"key", `a string: the idempotency key`},
	{"key_format", `"token" or "structured"`},
	{"status_url", `a string: the status URL template with {key} and/or {id}`},
	{"key_ttl", `a duration string such as "24h" (a bare number is refused: its unit would be a guess)`},
	{"max_attempts", `an integer from 1 to 100`},
	{"deadline", `a duration string such as "15m" (a bare number is refused: its unit would be a guess)`},
	{"attempt_timeout", `a duration string such as "10s" (a bare number is refused: its unit would be a guess)`},
	{"replay_safe", `true or false`},
	{"no_effect_statuses", `an array of HTTP statuses such as [503]`},
	{"run_at", `a string: ` + RunAtAccepted},
}

// EnqueueFields lists the fields of an EnqueueSpec.
func EnqueueFields() []string {
	out := make([]string, len(specFields))
	for i, f := range specFields {
		out[i] = f.name
	}
	return out
}

func specAccepted(name string) string {
	for _, f := range specFields {
		if f.name == name {
			return f.accepted
		}
	}
	return ""
}

// SpecWhole is the InvalidError field of a refusal of an EnqueueSpec as a
// whole (not JSON, not an object, an unknown or repeated field); a
// refusal of one field names that field.
const SpecWhole = "request body"

// mayHoldSecrets are the fields whose values may carry credentials (a
// token in a URL, an Authorization header, a key, a body): a refusal
// shows their kind and size, never their text.
var mayHoldSecrets = map[string]bool{"url": true, "headers": true, "header_lines": true, "data": true, "body": true, "key": true, "status_url": true}

// DecodeEnqueue reads one EnqueueSpec from b, field by field, so a
// refusal names the field (and its value, unless it may hold secrets).
// Nothing JSON decoding would change on the way is accepted (bytes that
// are not UTF-8, lone surrogate escapes, a field given twice): a request
// is stored as its author wrote it. A field given with an empty or zero
// value is refused, as the flag it stands for would be (`enqueue --from`).
func DecodeEnqueue(b []byte) (EnqueueSpec, error) { return decodeSpec(b, true) }

// DecodeEnqueueDefaults is DecodeEnqueue for the admin API: a field given
// as null, or with an empty or zero value, means its default, as it did
// in the admin API's earlier body (clients that serialise every field
// send them).
func DecodeEnqueueDefaults(b []byte) (EnqueueSpec, error) { return decodeSpec(b, false) }

func decodeSpec(b []byte, strict bool) (EnqueueSpec, error) {
	var s EnqueueSpec
	whole := func(value, accepted string) error {
		return &InvalidError{Field: SpecWhole, Value: value, Accepted: accepted}
	}
	if err := strictjson.Check(b); err != nil {
		return s, whole(fmt.Sprintf("(%d bytes)", len(b)), "one JSON object, valid UTF-8, each field once ("+err.Error()+")")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		why := "not a JSON object"
		if err != nil {
			why = err.Error()
		}
		return s, whole(fmt.Sprintf("(%d bytes)", len(b)), "one JSON object with the fields "+strings.Join(EnqueueFields(), ", ")+" ("+why+")")
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	slices.Sort(names) // the first bad field, the same on every run
	var headers json.RawMessage
	targets := map[string]any{
		"url": &s.URL, "method": &s.Method, "headers": &headers, "header_lines": &s.HeaderLines, "data": &s.Data, "body": &s.Body,
		"key": &s.Key, "key_format": &s.KeyFormat, "status_url": &s.StatusURL, "key_ttl": &s.KeyTTL,
		"max_attempts": &s.MaxAttempts, "deadline": &s.Deadline, "attempt_timeout": &s.AttemptTimeout,
		"replay_safe": &s.ReplaySafe, "no_effect_statuses": &s.NoEffectStatuses, "run_at": &s.RunAt,
	}
	present := map[string]bool{}
	seen := map[string]string{}
	for _, n := range names {
		// Field names match without regard to case, as encoding/json's do.
		ln := strings.ToLower(n)
		if prev, dup := seen[ln]; dup {
			return s, whole(fmt.Sprintf("fields %q and %q", prev, n), "each field once (names match without regard to case)")
		}
		seen[ln] = n
		dst, ok := targets[ln]
		if !ok {
			return s, whole(fmt.Sprintf("field %q", n), "the fields "+strings.Join(EnqueueFields(), ", "))
		}
		if !strict && string(raw[n]) == "null" {
			continue // the default
		}
		present[ln] = true
		err := json.Unmarshal(raw[n], dst)
		if err == nil && ln == "headers" {
			s.Headers, err = decodeHeaders(headers)
		}
		if err != nil {
			if mayHoldSecrets[ln] {
				return s, &InvalidError{Field: ln, Value: shownField(raw[n]), Accepted: specAccepted(ln)}
			}
			return s, invalid(ln, string(raw[n]), specAccepted(ln))
		}
	}
	if present["data"] && present["body"] {
		return s, whole(`fields "data" and "body"`, "the body once: data (text) or body (base64)")
	}
	if !strict {
		return s, nil
	}
	return s, checkGiven(s, present)
}

// decodeHeaders reads the headers field in either of its forms.
func decodeHeaders(raw json.RawMessage) ([]WireHeader, error) {
	v := bytes.TrimSpace(raw)
	switch {
	case len(v) > 0 && v[0] == '{':
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		slices.Sort(names)
		hs := make([]WireHeader, len(names))
		for i, n := range names {
			hs[i] = WireHeader{Name: n, Value: m[n]}
		}
		return hs, nil
	case bytes.Equal(v, []byte("null")):
		return nil, nil
	default:
		var hs []WireHeader
		return hs, strictjson.Decode(v, &hs)
	}
}

// shownField is how a refused field that may hold secrets is shown: the
// kind of JSON value and its size.
func shownField(raw json.RawMessage) string {
	kind := "JSON value"
	if v := bytes.TrimSpace(raw); len(v) > 0 {
		switch v[0] {
		case '{':
			kind = "JSON object"
		case '[':
			kind = "JSON array"
		case '"':
			kind = "JSON string"
		case 't', 'f':
			kind = "JSON boolean"
		case 'n':
			kind = "JSON null"
		default:
			kind = "JSON number"
		}
	}
	return fmt.Sprintf("(a %s, %d bytes)", kind, len(raw))
}

// checkGiven refuses a field given with an empty or zero value: to get
// the default, a spec leaves the field out.
func checkGiven(s EnqueueSpec, present map[string]bool) error {
	bad := func(name, value, accepted string) error {
		return &InvalidError{Field: name, Value: value, Accepted: accepted + "; leave the field out for the default"}
	}
	switch {
	case present["method"] && s.Method == "":
		return bad("method", `""`, "an HTTP method such as POST")
	case present["key"] && s.Key == "":
		return bad("key", `""`, KeyAccepted)
	case present["key_format"] && s.KeyFormat == "":
		return bad("key_format", `""`, specAccepted("key_format"))
	case present["max_attempts"] && s.MaxAttempts < 1:
		return bad("max_attempts", fmt.Sprint(s.MaxAttempts), specAccepted("max_attempts"))
	case present["run_at"] && s.RunAt == "":
		return bad("run_at", `""`, RunAtAccepted)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"key_ttl", s.KeyTTL}, {"deadline", s.Deadline}, {"attempt_timeout", s.AttemptTimeout}} {
		if present[d.name] && d.v <= 0 {
			return bad(d.name, fmt.Sprintf("%q", time.Duration(d.v).String()), "a positive duration such as \"30s\"")
		}
	}
	return nil
}

// Parts returns the request and options s gives; a run_at duration
// counts from now. A refused header line is ParseHeaderLine's error.
func (s EnqueueSpec) Parts(now time.Time) (Request, EnqueueOptions, error) {
	req := Request{Method: s.Method, URL: s.URL, Body: s.Body}
	if s.Data != nil {
		req.Body = []byte(*s.Data)
	}
	for _, h := range s.Headers {
		req.Header = append(req.Header, Header{Name: h.Name, Value: h.Value})
	}
	for _, hl := range s.HeaderLines {
		h, err := ParseHeaderLine(hl)
		if err != nil {
			return req, EnqueueOptions{}, err
		}
		req.Header = append(req.Header, h)
	}
	o := EnqueueOptions{Key: s.Key, StatusURL: s.StatusURL, KeyTTL: time.Duration(s.KeyTTL), MaxAttempts: s.MaxAttempts,
		Deadline: time.Duration(s.Deadline), AttemptTimeout: time.Duration(s.AttemptTimeout), ReplaySafe: s.ReplaySafe,
		NoEffectStatuses: s.NoEffectStatuses}
	if s.KeyFormat != "" {
		f, err := idemkey.ParseFormat(s.KeyFormat)
		if err != nil {
			return req, o, invalid("key_format", s.KeyFormat, specAccepted("key_format"))
		}
		o.KeyFormat = f
	}
	if s.RunAt != "" {
		t, err := ParseRunAt(s.RunAt, now)
		if err != nil {
			return req, o, invalid("run_at", s.RunAt, RunAtAccepted)
		}
		o.RunAt = t
	}
	return req, o, nil
}

// SpecOf is the EnqueueSpec of a request and its options, as a client
// sends it: headers as an array and the body in base64, so every byte and
// every header line arrives as given.
func SpecOf(req Request, o EnqueueOptions) EnqueueSpec {
	s := EnqueueSpec{Method: req.Method, URL: req.URL, Body: req.Body, Key: o.Key, StatusURL: o.StatusURL,
		KeyTTL: Duration(o.KeyTTL), MaxAttempts: o.MaxAttempts, Deadline: Duration(o.Deadline),
		AttemptTimeout: Duration(o.AttemptTimeout), ReplaySafe: o.ReplaySafe, NoEffectStatuses: o.NoEffectStatuses}
	if o.KeyFormat != idemkey.FormatToken {
		s.KeyFormat = o.KeyFormat.String()
	}
	if !o.RunAt.IsZero() {
		s.RunAt = o.RunAt.Format(time.RFC3339Nano)
	}
	for _, h := range req.Header {
		s.Headers = append(s.Headers, WireHeader{h.Name, h.Value})
	}
	return s
}
