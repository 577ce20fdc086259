package admin

import (
	"math"
	"net"
	"sync"
	"time"
)

// AuthBurst is how many token attempts a client address may fail in a row
// before it is slowed; AuthRefill is how often it gets one more. Twenty
// lets a script with a stale token see its 401s; one a second makes
// guessing useless.
const (
	AuthBurst  = 20
	AuthRefill = time.Second
)

// maxTracked bounds the addresses the limiter remembers (about 100 bytes
// each).
const maxTracked = 1024

// limiter holds a bucket of token attempts per client address. An attempt
// takes one before the token is compared (so concurrent guesses cannot
// overdraw it) and a right token gives it back. When the table is full,
// the buckets that have refilled are dropped (they hold nothing a new one
// would not), at most once per refill; when none has, new addresses share
// one overflow bucket, so many addresses get no more guesses than one.
type limiter struct {
	mu        sync.Mutex
	now       func() time.Time
	burst     float64
	refill    time.Duration
	max       int
	addrs     map[string]*bucket
	overflow  bucket
	lastPrune time.Time
}

type bucket struct {
	left      float64   // attempts left at at
	at        time.Time // when left was computed
	throttled bool      // a refusal was logged and the bucket has not refilled since
	refused   int       // attempts refused since that log line
}

func newLimiter(now func() time.Time, burst int, refill time.Duration, max int) *limiter {
	return &limiter{now: now, burst: float64(burst), refill: refill, max: max, addrs: make(map[string]*bucket)}
}

// fill brings b up to now.
func (l *limiter) fill(b *bucket, now time.Time) {
	if b.at.IsZero() {
		b.left, b.at = l.burst, now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.left = math.Min(l.burst, b.left+float64(d)/float64(l.refill))
		b.at = now
	}
}

// bucketFor returns the bucket of key, making one (or using the overflow
// bucket) when it has none.
func (l *limiter) bucketFor(key string, now time.Time) *bucket {
	if b, ok := l.addrs[key]; ok {
		return b
	}
	if len(l.addrs) >= l.max && now.Sub(l.lastPrune) >= l.refill {
		l.lastPrune = now
		for k, b := range l.addrs {
			if l.fill(b, now); b.left >= l.burst && !b.throttled {
				delete(l.addrs, k)
			}
		}
	}
	if len(l.addrs) >= l.max {
		return &l.overflow
	}
	b := &bucket{}
	l.addrs[key] = b
	return b
}

// verdict is take's answer for one attempt.
type verdict struct {
	ok       bool          // an attempt was taken: compare the token
	left     int           // attempts left after this one
	wait     time.Duration // without ok: until the next attempt
	first    bool          // without ok: the first refusal since the bucket last had attempts (the one to log)
	refused  int           // with ok: attempts refused, unlogged, since that first one
	throttle bool          // with ok: the bucket was throttled until now
}

// take takes an attempt for key, or says how long until the next.
func (l *limiter) take(key string) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucketFor(key, now)
	l.fill(b, now)
	if b.left >= 1 {
		b.left--
		v := verdict{ok: true, left: int(b.left), throttle: b.throttled, refused: max(b.refused-1, 0)}
		b.throttled, b.refused = false, 0
		return v
	}
	v := verdict{wait: time.Duration((1 - b.left) * float64(l.refill)), first: !b.throttled}
	b.throttled = true
	b.refused++
	return v
}

// refund gives back the attempt of a request whose token was right.
func (l *limiter) refund(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucketFor(key, now)
	l.fill(b, now)
	b.left = math.Min(l.burst, b.left+1)
}

// clientKey is the bucket key of a request's remote address: the IP, and
// for IPv6 its /64, which one client usually holds whole.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
