package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// recordVersion is the version byte that prefixes every job record.
const recordVersion = 1

// ErrCorruptRecord is returned when a stored record cannot be decoded.
var ErrCorruptRecord = errors.New("store: corrupt job record")

// encodeJob returns the versioned record for j: one version byte, then JSON.
func encodeJob(j *Job) ([]byte, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("store: encode job %s: %w", j.ID, err)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, recordVersion)
	return append(out, b...), nil
}

// DecodeRecord decodes a stored job record. It is exported for fuzzing and
// for `idemrun check`; it never panics on bad input.
func DecodeRecord(b []byte) (*Job, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptRecord, len(b))
	}
	switch b[0] {
	case recordVersion:
	default:
		if b[0] > recordVersion {
			return nil, fmt.Errorf("%w: record version %d is newer than this idemrun (%d); upgrade idemrun", ErrCorruptRecord, b[0], recordVersion)
		}
		return nil, fmt.Errorf("%w: unknown record version %d", ErrCorruptRecord, b[0])
	}
	var j Job
	if err := json.Unmarshal(b[1:], &j); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	if _, err := uuid.Parse(j.ID); err != nil {
		return nil, fmt.Errorf("%w: bad id %q", ErrCorruptRecord, j.ID)
	}
	if _, ok := stateByte[j.State]; !ok {
		return nil, fmt.Errorf("%w: job %s has unknown state %q", ErrCorruptRecord, j.ID, j.State)
	}
	return &j, nil
}

var stateByte = map[State]byte{
	StatePending: 1, StateRunning: 2, StateUnknown: 3, StateSucceeded: 4,
	StateFailed: 5, StateNeedsAttention: 6, StateCanceled: 7,
}

var byteState = func() map[byte]State {
	m := make(map[byte]State, len(stateByte))
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
	return uint64(t.UnixNano()) ^ (1 << 63)
}

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
		return nil, fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	return u[:], nil
}

// indexKey is state | time | id.
func indexKey(s State, t time.Time, id []byte) []byte {
	k := make([]byte, 1+8+16)
	k[0] = stateByte[s]
	binary.BigEndian.PutUint64(k[1:9], timeKey(t))
	copy(k[9:], id)
	return k
}

func indexKeyOf(j *Job) []byte {
	id, _ := idBytes(j.ID)
	return indexKey(j.State, j.indexTime(), id)
}

// statePrefix returns the first index key byte of s, and the bound to stop
// scanning at for time ≤ until.
func dueBound(s State, until time.Time) []byte {
	k := make([]byte, 1+8)
	k[0] = stateByte[s]
	binary.BigEndian.PutUint64(k[1:9], timeKey(until))
	return k
}
