package runner

import (
	crand "crypto/rand"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"time"
)

const (
	// backoffMaxShift is the largest shift Ceiling ever applies; anything
	// larger is past every positive time.Duration anyway.
	backoffMaxShift = 62

	// backoffPCGStream is the fixed second PCG word of NewRand, so that one
	// uint64 seed names one sequence.
	backoffPCGStream = 0x9e3779b97f4a7c15
)

// Backoff computes the delay before a retry with "full jitter" (AWS
// Builders' Library): uniform in [0, min(Cap, Base·2^(attempt-1))].
// The zero value is ready to use. Backoff is a pure value; the randomness
// comes from the *rand.Rand passed to Delay.
type Backoff struct {
	// Base is the ceiling of the first retry's delay. Zero or negative
	// means the default, 250ms.
	Base time.Duration
	// Cap bounds every delay. Zero or negative means the default, 30s.
	Cap time.Duration
}

// Ceiling returns the largest delay Delay can draw for attempt:
// min(Cap, Base·2^(attempt-1)). An attempt of 0 or less counts as 1. It never
// overflows, whatever the attempt, and is non-decreasing in attempt.
func (b Backoff) Ceiling(attempt int) time.Duration {
	base, limit := b.backoffLimits()
	if attempt < 1 {
		attempt = 1
	}
	if base >= limit {
		return limit
	}
	shift := attempt - 1
	if shift > backoffMaxShift {
		return limit
	}
	// base·2^shift ≤ limit ⇔ base ≤ ⌊limit / 2^shift⌋, so the shift below
	// happens only when its result fits.
	if base > limit>>shift {
		return limit
	}
	return base << shift
}

// Delay returns a delay drawn uniformly from [0, Ceiling(attempt)], both
// ends included, using r. It is never negative and never above Cap (or the
// default cap). An attempt of 0 or less counts as 1. r must not be nil; a
// *rand.Rand is not safe for concurrent use, so callers sharing one must
// serialize calls.
func (b Backoff) Delay(attempt int, r *rand.Rand) time.Duration {
	ceiling := b.Ceiling(attempt)
	if ceiling == math.MaxInt64 {
		// ceiling+1 would overflow; dropping the single top value is harmless.
		return time.Duration(r.Int64N(int64(ceiling)))
	}
	return time.Duration(r.Int64N(int64(ceiling) + 1))
}

// backoffLimits returns Base and Cap with the defaults applied.
func (b Backoff) backoffLimits() (base, limit time.Duration) {
	base, limit = b.Base, b.Cap
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if limit <= 0 {
		limit = DefaultBackoffCap
	}
	return base, limit
}

// NewRand returns a deterministic PCG-backed *rand.Rand for seed: the same
// seed gives the same sequence, for tests and reproducible schedules. The
// result is not safe for concurrent use.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, backoffPCGStream))
}

// NewSeededRand returns a PCG-backed *rand.Rand seeded from crypto/rand, so
// that two processes (or two runners) draw different jitter and do not retry
// in lockstep. The result is not safe for concurrent use.
func NewSeededRand() *rand.Rand {
	var seed [16]byte
	// crypto/rand.Read never returns an error (it aborts the program if the
	// system source fails), so there is nothing to handle here.
	_, _ = crand.Read(seed[:])
	return rand.New(rand.NewPCG(
		binary.LittleEndian.Uint64(seed[:8]),
		binary.LittleEndian.Uint64(seed[8:]),
	))
}
