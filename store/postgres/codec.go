package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/internal/jobbinary"
)

// encodeJob returns the record stored in the job column: the binary
// encoding of store/internal/jobbinary, as store/bolt stores it. A field
// added to Job needs a new format there, for both backends at once.
func encodeJob(j *store.Job) ([]byte, error) {
	if _, ok := stateByte[j.State]; !ok {
		return nil, fmt.Errorf("store: encode job %s: unknown state %q", j.ID, j.State)
	}
	return jobbinary.Append(nil, j), nil
}

// asciiJSON escapes every non-ASCII character of the JSON text b as \uXXXX
// (a surrogate pair beyond the BMP). encoding/json writes valid UTF-8,
// and such characters occur only inside strings.
func asciiJSON(b []byte) []byte {
	i := slices.IndexFunc(b, func(c byte) bool { return c >= utf8.RuneSelf })
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/4)
	out = append(out, b[:i]...)
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			continue
		}
		out = fmt.Appendf(out, `\u%04x`, r)
	}
	return out
}

// decodeJob decodes a job record: the binary encoding, or the JSON text
// of a record written before schema version 4 (it starts with "{", which
// no binary format does). A field this idemrun does not know is refused,
// not dropped: the record was written by a newer idemrun, and writing it
// back would lose what that one stored.
func decodeJob(b []byte) (*store.Job, error) {
	decode := jobbinary.Decode
	if len(b) > 0 && b[0] == '{' {
		decode = decodeJobJSON
	}
	j, err := decode(b)
	if err != nil {
		return nil, err
	}
	if _, err := uuid.Parse(j.ID); err != nil {
		return nil, fmt.Errorf("%w: bad id %q", ErrCorruptRecord, j.ID)
	}
	if _, ok := stateByte[j.State]; !ok {
		return nil, fmt.Errorf("%w: job %s has unknown state %q", ErrCorruptRecord, j.ID, j.State)
	}
	return j, nil
}

// decodeJobJSON decodes a record in the JSON of store.Job.
func decodeJobJSON(b []byte) (*store.Job, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var j store.Job
	if err := d.Decode(&j); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: data after the job", ErrCorruptRecord)
	}
	return &j, nil
}

// cols are a job's column values, derived from the job alone.
type cols struct {
	id, key, state string
	next, updated  int64
	fence          int64
	attempts       int64
	owner          string
	job            []byte
	// host is store.ClaimHost of the job: claims skip hosts by it.
	host string
}

// colsOf encodes j and the columns that copy its fields.
func colsOf(j *store.Job) (cols, error) {
	rec, err := encodeJob(j)
	if err != nil {
		return cols{}, err
	}
	if j.Fence > math.MaxInt64 {
		return cols{}, fmt.Errorf("store: job %s: fence %d does not fit a bigint", j.ID, j.Fence)
	}
	return cols{
		id: j.ID, key: j.Key, state: string(j.State),
		next: nanos(j.NextRunAt), updated: nanos(j.UpdatedAt),
		fence: int64(j.Fence), attempts: int64(j.Attempts), owner: j.Owner, job: rec,
		host: store.ClaimHost(j),
	}, nil
}

// updateArgs are the arguments of queries.update for c: id, then the
// columns it sets.
func (c cols) updateArgs() []any {
	return []any{c.id, c.state, c.next, c.updated, c.fence, c.attempts, c.owner, c.job, c.host}
}

// insertArgs are the arguments of queries.insert for c.
func (c cols) insertArgs() []any {
	return []any{c.id, c.key, c.state, c.next, c.updated, c.fence, c.attempts, c.owner, c.job, c.host}
}

// The store's times are kept as Unix nanoseconds. Outside 1678–2262 they
// saturate, so a far date sorts last (or first), never in between; the
// zero time is the smallest value and sorts before all others.
var (
	maxNanoTime = time.Unix(0, math.MaxInt64)
	minNanoTime = time.Unix(0, math.MinInt64+1)
)

func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return math.MinInt64
	case t.After(maxNanoTime):
		return math.MaxInt64
	case t.Before(minNanoTime):
		return math.MinInt64 + 1
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// sortNanos is the time j is ordered by within its state (the sort_ns
// column).
func sortNanos(j *store.Job) int64 {
	if j.State == store.StatePending || j.State == store.StateUnknown {
		return nanos(j.NextRunAt)
	}
	return nanos(j.UpdatedAt)
}

// stateByte numbers the states in list cursors, as store/bolt's index
// does, so a cursor reads the same whatever the backend.
var stateByte = map[store.State]byte{
	store.StatePending: 1, store.StateRunning: 2, store.StateUnknown: 3, store.StateSucceeded: 4,
	store.StateFailed: 5, store.StateNeedsAttention: 6, store.StateCanceled: 7,
}

// jobID parses a job id; one that is not a UUID names no job.
func jobID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not a job id", store.ErrNotFound, id)
	}
	return u.String(), nil
}

// checkNew checks a job to enqueue and spells its id the one way the
// database returns it.
func checkNew(j *store.Job) error {
	if err := store.CheckNew(j); err != nil {
		return err
	}
	u, err := uuid.Parse(j.ID)
	if err != nil {
		return fmt.Errorf("store: job id %q is not a UUID", j.ID)
	}
	j.ID = u.String()
	// A request that is not UTF-8 is refused, as the api refuses it
	// before it gets here (and as records were JSON before schema 4).
	for _, f := range []struct{ name, v string }{
		{"key", j.Key}, {"fingerprint", j.Fingerprint}, {"method", j.Request.Method}, {"URL", j.Request.URL},
		{"status URL", j.StatusURL}, {"key format", j.KeyFormat},
	} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("store: job %s: its %s is not valid UTF-8", j.ID, f.name)
		}
	}
	for _, h := range j.Request.Header {
		if !utf8.ValidString(h.Name) || !utf8.ValidString(h.Value) {
			return fmt.Errorf("store: job %s: a header is not valid UTF-8", j.ID)
		}
	}
	return nil
}

// errRequestChanged refuses a write that changes what a job sends (P2: one
// key, one request, for life).
var errRequestChanged = errors.New("its request (method, URL, headers, body), fingerprint and key format never change after enqueue")
