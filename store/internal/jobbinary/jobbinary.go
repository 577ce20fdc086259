// Package jobbinary is the binary encoding of a store.Job that both
// backends store as a job's record: compact, and several times cheaper
// to write and read than the job's JSON.
package jobbinary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemrun/idemrun/store"
)

// ErrCorrupt is wrapped by every error of Decode.
var ErrCorrupt = errors.New("store: corrupt job record")

// binaryFormat is the first byte of a binary job encoding. The format fixes
// the list and order of the fields that follow, so a field is known by its
// position alone. A change to Job (a field added, removed or reinterpreted)
// needs a new format: append the new fields at the end and bump this.
//
// Format 2 is format 1 followed by Owner. A job without an owner is still
// written in format 1, so its bytes are what older versions wrote and read.
const binaryFormat = 2

// binaryFormatNoOwner is the format of a job whose Owner is empty.
const binaryFormatNoOwner = 1

// Minimum encoded sizes, used to bound element counts by the bytes left
// before anything is allocated.
const (
	minHeaderFieldLen = 2  // two empty strings
	minEventLen       = 18 // eighteen one-byte fields
)

// sharedStringsMax is the largest encoding whose strings are cut out of a
// single copy of the input. Above it each string gets its own allocation, so
// a decoded job does not keep large bodies alive twice.
const sharedStringsMax = 4 << 10

// Append appends the binary encoding of every field of j to dst and
// returns the extended slice.
//
// The encoding is the format byte followed by the fields of Job in
// declaration order, nested structs inline: integers and durations as
// varints, Fence as a uvarint, strings and byte slices as a uvarint length and
// the bytes, bools as one byte 0 or 1, slices as a uvarint count and the
// elements, the Result pointer as a presence byte and, if 1, its fields.
// Times are a presence byte (0 for the zero time) and, if 1, Unix seconds as
// a varint and nanoseconds as a uvarint; location and monotonic reading are
// not kept. Nil and empty slices encode alike and both decode as nil.
func Append(dst []byte, j *store.Job) []byte {
	dst = slices.Grow(dst, sizeHint(j))
	format := byte(binaryFormat)
	if j.Owner == "" {
		format = binaryFormatNoOwner
	}
	dst = append(dst, format)
	dst = appendString(dst, j.ID)
	dst = appendString(dst, j.Key)
	dst = appendString(dst, j.Fingerprint)
	dst = appendString(dst, string(j.State))

	dst = appendString(dst, j.Request.Method)
	dst = appendString(dst, j.Request.URL)
	dst = binary.AppendUvarint(dst, uint64(len(j.Request.Header)))
	for _, h := range j.Request.Header {
		dst = appendString(dst, h.Name)
		dst = appendString(dst, h.Value)
	}
	dst = appendBytes(dst, j.Request.Body)

	dst = appendString(dst, j.StatusURL)
	dst = binary.AppendVarint(dst, int64(j.KeyTTL))
	dst = binary.AppendVarint(dst, int64(j.MaxAttempts))
	dst = binary.AppendVarint(dst, int64(j.DeadlineAfter))
	dst = binary.AppendVarint(dst, int64(j.AttemptTimeout))
	dst = appendBool(dst, j.ReplaySafe)
	dst = binary.AppendUvarint(dst, uint64(len(j.NoEffectStatuses)))
	for _, s := range j.NoEffectStatuses {
		dst = binary.AppendVarint(dst, int64(s))
	}
	dst = appendString(dst, j.KeyFormat)

	dst = appendTime(dst, j.CreatedAt)
	dst = appendTime(dst, j.UpdatedAt)
	dst = appendTime(dst, j.NextRunAt)
	dst = appendTime(dst, j.Deadline)

	dst = binary.AppendVarint(dst, int64(j.Attempts))
	dst = binary.AppendVarint(dst, int64(j.AttemptBase))
	dst = binary.AppendVarint(dst, int64(j.RetryBase))
	dst = binary.AppendVarint(dst, int64(j.StatusQueries))
	dst = binary.AppendVarint(dst, int64(j.StatusBase))
	dst = appendTime(dst, j.FirstSentAt)
	dst = appendTime(dst, j.UnknownSince)
	dst = appendBool(dst, j.MayHaveEffect)
	dst = binary.AppendUvarint(dst, j.Fence)

	dst = appendString(dst, j.LastError)
	dst = binary.AppendVarint(dst, int64(j.LastStatus))
	dst = appendString(dst, j.LastClass)
	dst = appendString(dst, j.Reason)
	if r := j.Result; r == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, int64(r.HTTPStatus))
		dst = appendBytes(dst, r.Body)
		dst = appendBool(dst, r.Truncated)
		dst = appendString(dst, r.Source)
	}

	dst = binary.AppendUvarint(dst, uint64(len(j.History)))
	for i := range j.History {
		dst = appendEvent(dst, &j.History[i])
	}
	dst = binary.AppendVarint(dst, int64(j.HistoryDropped))
	if format >= 2 {
		dst = appendString(dst, j.Owner)
	}
	return dst
}

func appendEvent(dst []byte, e *store.Event) []byte {
	dst = appendString(dst, string(e.Kind))
	dst = binary.AppendVarint(dst, int64(e.N))
	dst = appendTime(dst, e.Start)
	dst = appendTime(dst, e.End)
	dst = appendString(dst, e.Class)
	dst = binary.AppendVarint(dst, int64(e.HTTPStatus))
	dst = appendString(dst, e.Error)
	dst = appendString(dst, e.RetryAfter)
	dst = appendString(dst, e.Replayed)
	dst = appendBool(dst, e.Truncated)
	dst = binary.AppendVarint(dst, int64(e.Delay))
	dst = appendString(dst, e.DelayReason)
	dst = appendString(dst, e.Outcome)
	dst = appendString(dst, e.Detail)
	dst = appendString(dst, e.Actor)
	dst = appendString(dst, e.Note)
	dst = appendString(dst, string(e.From))
	dst = appendString(dst, string(e.To))
	return dst
}

// sizeHint returns a size close above the encoding of j, so that
// Append grows dst once at most. It need not be exact.
func sizeHint(j *store.Job) int {
	n := 160 + len(j.ID) + len(j.Key) + len(j.Fingerprint) + len(j.Request.URL) +
		len(j.Request.Body) + len(j.StatusURL) + len(j.LastError) + len(j.Reason) + len(j.Owner) + 10*len(j.NoEffectStatuses)
	for _, h := range j.Request.Header {
		n += 4 + len(h.Name) + len(h.Value)
	}
	if j.Result != nil {
		n += len(j.Result.Body)
	}
	for i := range j.History {
		e := &j.History[i]
		n += 64 + len(e.Class) + len(e.Error) + len(e.RetryAfter) + len(e.Replayed) + len(e.DelayReason) +
			len(e.Outcome) + len(e.Detail) + len(e.Actor) + len(e.Note)
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// Decode decodes an encoding made by Append. It never panics; on bad input it returns an error wrapping ErrCorrupt that
// names the field it stopped at. It accepts only the canonical encoding
// (minimal varints, bools and presence bytes 0 or 1, nanoseconds below one
// second, no trailing bytes), so a decoded job encodes back to b exactly.
// Times decode in UTC; nil and empty slices decode as nil. The job shares no
// memory with b.
func Decode(b []byte) (*store.Job, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty binary job", ErrCorrupt)
	}
	switch f := b[0]; {
	case f > binaryFormat:
		return nil, fmt.Errorf("%w: binary job format %d is newer than this idemrun (%d); upgrade idemrun", ErrCorrupt, f, binaryFormat)
	case f < binaryFormatNoOwner:
		return nil, fmt.Errorf("%w: unknown binary job format %d", ErrCorrupt, f)
	}
	format := b[0]
	c := &cursor{b: b, off: 1, event: -1}
	if len(b) <= sharedStringsMax {
		c.all = string(b)
	}
	j := new(store.Job)
	j.ID = c.str("id")
	j.Key = c.str("key")
	j.Fingerprint = c.str("fingerprint")
	j.State = store.State(c.str("state"))

	j.Request.Method = c.str("request.method")
	j.Request.URL = c.str("request.url")
	if n := c.count("request.header", minHeaderFieldLen); n > 0 {
		j.Request.Header = make([]store.HeaderField, n)
		for i := range j.Request.Header {
			h := &j.Request.Header[i]
			h.Name = c.str("request.header.name")
			h.Value = c.str("request.header.value")
		}
	}
	j.Request.Body = c.bytes("request.body")

	j.StatusURL = c.str("status_url")
	j.KeyTTL = time.Duration(c.varint("key_ttl"))
	j.MaxAttempts = c.int("max_attempts")
	j.DeadlineAfter = time.Duration(c.varint("deadline_after"))
	j.AttemptTimeout = time.Duration(c.varint("attempt_timeout"))
	j.ReplaySafe = c.bool("replay_safe")
	if n := c.count("no_effect_statuses", 1); n > 0 {
		j.NoEffectStatuses = make([]int, n)
		for i := range j.NoEffectStatuses {
			j.NoEffectStatuses[i] = c.int("no_effect_statuses")
		}
	}
	j.KeyFormat = c.str("key_format")

	j.CreatedAt = c.time("created_at")
	j.UpdatedAt = c.time("updated_at")
	j.NextRunAt = c.time("next_run_at")
	j.Deadline = c.time("deadline")

	j.Attempts = c.int("attempts")
	j.AttemptBase = c.int("attempt_base")
	j.RetryBase = c.int("retry_base")
	j.StatusQueries = c.int("status_queries")
	j.StatusBase = c.int("status_base")
	j.FirstSentAt = c.time("first_sent_at")
	j.UnknownSince = c.time("unknown_since")
	j.MayHaveEffect = c.bool("may_have_effect")
	j.Fence = c.uvarint("fence")

	j.LastError = c.str("last_error")
	j.LastStatus = c.int("last_status")
	j.LastClass = c.str("last_class")
	j.Reason = c.str("reason")
	if c.bool("result") {
		r := new(store.Result)
		r.HTTPStatus = c.int("result.http_status")
		r.Body = c.bytes("result.body")
		r.Truncated = c.bool("result.truncated")
		r.Source = c.str("result.source")
		j.Result = r
	}

	if n := c.count("history", minEventLen); n > 0 {
		j.History = make([]store.Event, n)
		for i := 0; i < n && c.err == ""; i++ {
			c.event = i
			c.decodeEvent(&j.History[i])
		}
		c.event = -1
	}
	j.HistoryDropped = c.int("history_dropped")
	if format >= 2 {
		j.Owner = c.str("owner")
		if c.err == "" && j.Owner == "" {
			c.fail(c.off, "owner", "empty in format 2 (a job without an owner is written in format 1)")
		}
	}

	if c.err == "" && c.off != len(b) {
		c.fail(c.off, "end", fmt.Sprintf("%d trailing bytes after the last field of format %d", len(b)-c.off, format))
	}
	if c.err != "" {
		if c.errEvent >= 0 {
			return nil, fmt.Errorf("%w: binary job at history[%d].%s (byte %d): %s", ErrCorrupt, c.errEvent, c.field, c.errAt, c.err)
		}
		return nil, fmt.Errorf("%w: binary job at %s (byte %d): %s", ErrCorrupt, c.field, c.errAt, c.err)
	}
	return j, nil
}

func (c *cursor) decodeEvent(e *store.Event) {
	e.Kind = store.EventKind(c.str("kind"))
	e.N = c.int("n")
	e.Start = c.time("start")
	e.End = c.time("end")
	e.Class = c.str("class")
	e.HTTPStatus = c.int("http_status")
	e.Error = c.str("error")
	e.RetryAfter = c.str("retry_after")
	e.Replayed = c.str("idempotent_replayed")
	e.Truncated = c.bool("truncated")
	e.Delay = time.Duration(c.varint("delay"))
	e.DelayReason = c.str("delay_reason")
	e.Outcome = c.str("outcome")
	e.Detail = c.str("detail")
	e.Actor = c.str("actor")
	e.Note = c.str("note")
	e.From = store.State(c.str("from"))
	e.To = store.State(c.str("to"))
}

// cursor reads a binary job front to back. After the first failure every
// read returns the zero value and the failure is kept, so decoding code reads
// straight through and checks once at the end.
type cursor struct {
	b   []byte
	off int
	// all is b as one string, when b is small enough that strings may be
	// cut from it; empty otherwise.
	all   string
	event int // history index being read, or -1

	err      string // first failure, empty while none
	field    string // field of the first failure
	errAt    int    // offset where that field starts
	errEvent int    // history index of the first failure, or -1
}

// fail records the first failure: the field that starts at offset at.
func (c *cursor) fail(at int, field, reason string) {
	if c.err == "" {
		c.errAt, c.field, c.err, c.errEvent = at, field, reason, c.event
	}
}

func (c *cursor) uvarint(field string) uint64 {
	if c.err != "" {
		return 0
	}
	if c.off < len(c.b) && c.b[c.off] < 0x80 {
		v := c.b[c.off]
		c.off++
		return uint64(v)
	}
	v, n := binary.Uvarint(c.b[c.off:])
	switch {
	case n == 0:
		c.fail(c.off, field, "truncated")
		return 0
	case n < 0:
		c.fail(c.off, field, "varint overflows 64 bits")
		return 0
	case c.b[c.off+n-1] == 0:
		// A final zero byte adds nothing: a longer form of a shorter varint.
		c.fail(c.off, field, "varint not in its shortest form")
		return 0
	}
	c.off += n
	return v
}

func (c *cursor) varint(field string) int64 {
	u := c.uvarint(field)
	// Zigzag, as in binary.Varint.
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (c *cursor) int(field string) int {
	at := c.off
	v := c.varint(field)
	if int64(int(v)) != v {
		c.fail(at, field, fmt.Sprintf("%d overflows int", v))
		return 0
	}
	return int(v)
}

func (c *cursor) byte(field string) byte {
	if c.err != "" {
		return 0
	}
	if c.off >= len(c.b) {
		c.fail(c.off, field, "truncated")
		return 0
	}
	v := c.b[c.off]
	c.off++
	return v
}

func (c *cursor) bool(field string) bool {
	switch c.byte(field) {
	case 0:
		return false
	case 1:
		return true
	default:
		c.fail(c.off-1, field, fmt.Sprintf("flag byte %d is neither 0 nor 1", c.b[c.off-1]))
		return false
	}
}

// length reads a byte length and checks it against the bytes left.
func (c *cursor) length(field string) int {
	at := c.off
	n := c.uvarint(field)
	if c.err != "" {
		return 0
	}
	if n > uint64(len(c.b)-c.off) {
		c.fail(at, field, fmt.Sprintf("length %d exceeds the %d bytes left", n, len(c.b)-c.off))
		return 0
	}
	return int(n)
}

// count reads an element count and checks that the bytes left could hold
// that many elements of at least minLen bytes each, so a hostile count
// cannot make the decoder allocate more than the input justifies.
func (c *cursor) count(field string, minLen int) int {
	at := c.off
	n := c.uvarint(field)
	if c.err != "" {
		return 0
	}
	if n > uint64((len(c.b)-c.off)/minLen) {
		c.fail(at, field, fmt.Sprintf("count %d exceeds what the %d bytes left can hold", n, len(c.b)-c.off))
		return 0
	}
	return int(n)
}

func (c *cursor) str(field string) string {
	n := c.length(field)
	if n == 0 {
		return ""
	}
	start := c.off
	c.off += n
	if c.all != "" {
		return c.all[start:c.off]
	}
	return string(c.b[start:c.off])
}

func (c *cursor) bytes(field string) []byte {
	n := c.length(field)
	if n == 0 {
		return nil
	}
	out := make([]byte, n)
	copy(out, c.b[c.off:])
	c.off += n
	return out
}

func (c *cursor) time(field string) time.Time {
	at := c.off
	if !c.bool(field) {
		return time.Time{}
	}
	sec := c.varint(field)
	nsec := c.uvarint(field)
	if c.err != "" {
		return time.Time{}
	}
	if nsec >= 1e9 {
		c.fail(at, field, fmt.Sprintf("nanoseconds %d not below one second", nsec))
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec)).UTC()
	if t.IsZero() {
		c.fail(at, field, "zero time marked present")
		return time.Time{}
	}
	return t
}
