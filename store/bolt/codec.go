package bolt

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/internal/jobbinary"
)

// recordVersion is the version byte that prefixes every job record.
const recordVersion = 1

// ErrCorruptRecord is returned when a stored record cannot be decoded.
var ErrCorruptRecord = jobbinary.ErrCorrupt

// headLen is the size of the fixed record head: version, state byte, the
// index sort time and the fence. The writer reads the head to move index
// entries and counters without decoding the body, so encoding and
// decoding happen in the callers' goroutines, not in the single writer.
const headLen = 1 + 1 + 8 + 8

// encodeJob returns the versioned record for j: version byte, state byte,
// big-endian index time, big-endian fence, then the job in the binary
// encoding of store/internal/jobbinary.
func encodeJob(j *store.Job) ([]byte, error) {
	sb, ok := stateByte[j.State]
	if !ok {
		return nil, fmt.Errorf("store: encode job %s: unknown state %q", j.ID, j.State)
	}
	out := make([]byte, headLen, headLen+512+len(j.Request.Body))
	out[0] = recordVersion
	out[1] = sb
	binary.BigEndian.PutUint64(out[2:10], timeKey(indexTime(j)))
	binary.BigEndian.PutUint64(out[10:18], j.Fence)
	return jobbinary.Append(out, j), nil
}

// head is the fixed part of a record.
type head struct {
	state byte
	itime [8]byte
	fence uint64
}

func parseHead(v []byte) (head, bool) {
	var h head
	if len(v) < headLen+2 || v[0] != recordVersion {
		return h, false
	}
	h.state = v[1]
	copy(h.itime[:], v[2:10])
	h.fence = binary.BigEndian.Uint64(v[10:18])
	_, ok := byteState[h.state]
	return h, ok
}

// indexKey returns the index entry of a job with this head.
func (h head) indexKey(id []byte) []byte {
	k := make([]byte, 1+8+16)
	k[0] = h.state
	copy(k[1:9], h.itime[:])
	copy(k[9:], id)
	return k
}

// DecodeRecord decodes a stored job record. It is exported for fuzzing and
// for `idemrun check`; it never panics on bad input.
func DecodeRecord(b []byte) (*store.Job, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty record", ErrCorruptRecord)
	}
	switch b[0] {
	case recordVersion:
	default:
		if b[0] > recordVersion {
			return nil, fmt.Errorf("%w: record version %d is newer than this idemrun (%d); upgrade idemrun", ErrCorruptRecord, b[0], recordVersion)
		}
		return nil, fmt.Errorf("%w: unknown record version %d", ErrCorruptRecord, b[0])
	}
	h, ok := parseHead(b)
	if !ok {
		return nil, fmt.Errorf("%w: bad record head (%d bytes)", ErrCorruptRecord, len(b))
	}
	jp, err := jobbinary.Decode(b[headLen:])
	if err != nil {
		return nil, err
	}
	j := *jp
	if _, err := uuid.Parse(j.ID); err != nil {
		return nil, fmt.Errorf("%w: bad id %q", ErrCorruptRecord, j.ID)
	}
	if _, ok := stateByte[j.State]; !ok {
		return nil, fmt.Errorf("%w: job %s has unknown state %q", ErrCorruptRecord, j.ID, j.State)
	}
	if h.state != stateByte[j.State] || h.fence != j.Fence || binary.BigEndian.Uint64(h.itime[:]) != timeKey(indexTime(&j)) {
		return nil, fmt.Errorf("%w: job %s: record head disagrees with its body", ErrCorruptRecord, j.ID)
	}
	return &j, nil
}

var stateByte = map[store.State]byte{
	store.StatePending: 1, store.StateRunning: 2, store.StateUnknown: 3, store.StateSucceeded: 4,
	store.StateFailed: 5, store.StateNeedsAttention: 6, store.StateCanceled: 7,
}

var byteState = func() map[byte]store.State {
	m := make(map[byte]store.State, len(stateByte))
	for s, b := range stateByte {
		m[b] = s
	}
	return m
}()

// timeKey encodes t so that byte order is time order, negatives included.
func timeKey(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	// UnixNano wraps outside 1678–2262; saturate instead, so a far date
	// sorts last (or first), never somewhere in between.
	switch {
	case t.After(maxKeyTime):
		t = maxKeyTime
	case t.Before(minKeyTime):
		t = minKeyTime
	}
	return uint64(t.UnixNano()) ^ (1 << 63)
}

var (
	maxKeyTime = time.Unix(0, math.MaxInt64)
	minKeyTime = time.Unix(0, math.MinInt64+1)
)

func timeFromKey(k uint64) time.Time {
	if k == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(k^(1<<63))).UTC()
}

// idBytes parses a job id into its 16 key bytes.
func idBytes(id string) ([]byte, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a job id", store.ErrNotFound, id)
	}
	return u[:], nil
}

// indexKey is state | time | id.
func indexKey(s store.State, t time.Time, id []byte) []byte {
	k := make([]byte, 1+8+16)
	k[0] = stateByte[s]
	binary.BigEndian.PutUint64(k[1:9], timeKey(t))
	copy(k[9:], id)
	return k
}

func indexKeyOf(j *store.Job) []byte {
	id, _ := idBytes(j.ID)
	return indexKey(j.State, indexTime(j), id)
}

// dueBound is the index key prefix state|time that ends a scan of s's
// entries with times up to until.
func dueBound(s store.State, until time.Time) []byte {
	k := make([]byte, 1+8)
	k[0] = stateByte[s]
	binary.BigEndian.PutUint64(k[1:9], timeKey(until))
	return k
}

// indexTime is the time a job is ordered by inside its state's index.
func indexTime(j *store.Job) time.Time {
	switch j.State {
	case store.StatePending, store.StateUnknown:
		return j.NextRunAt
	default:
		return j.UpdatedAt
	}
}

// indexHostTag starts an index entry's value that names the job's claim
// host. Entries written before it have empty values: their host is read
// from the record.
const indexHostTag = 1

// indexValue is the index entry's value for j: its claim host for a due
// state (pending, unknown), so a claim can pass over a skipped host's jobs
// without loading their records, and nothing for the other states.
func indexValue(j *store.Job) []byte {
	if j.State != store.StatePending && j.State != store.StateUnknown {
		return nil
	}
	return hostValue([]byte(store.ClaimHost(j)))
}

// entryHost returns the claim host an index entry's value names, and
// false for an entry that names none.
func entryHost(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != indexHostTag {
		return nil, false
	}
	return v[1:], true
}
