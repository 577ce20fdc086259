package admin

import (
	"fmt"
	"testing"
	"time"
)

// The table of addresses stays bounded: when it is full, refilled buckets
// are dropped, and when none has refilled, new addresses share one
// overflow bucket, so more addresses buy no more guesses.
func TestLimiterTableIsBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(func() time.Time { return now }, 3, time.Second, 8)
	for i := range 8 {
		if v := l.take(fmt.Sprintf("10.0.0.%d", i)); !v.ok {
			t.Fatalf("address %d: first attempt refused", i)
		}
	}
	got := 0
	for i := range 100 {
		if l.take(fmt.Sprintf("10.0.1.%d", i)).ok {
			got++
		}
	}
	if len(l.addrs) > 8 || got != 3 {
		t.Errorf("full table: %d addresses tracked, %d attempts for 100 new addresses; want at most 8 and the overflow bucket's 3", len(l.addrs), got)
	}
	now = now.Add(time.Minute) // every bucket has refilled: they are dropped for new ones
	for i := range 8 {
		if v := l.take(fmt.Sprintf("10.0.2.%d", i)); !v.ok {
			t.Errorf("after a refill, new address %d refused", i)
		}
	}
	if len(l.addrs) > 8 {
		t.Errorf("%d addresses tracked, want at most 8", len(l.addrs))
	}
}

// A right token gives its attempt back; a refused one says how long to
// wait, and only the first refusal is reported for the log.
func TestLimiterTakeAndRefund(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(func() time.Time { return now }, 2, time.Second, 8)
	for range 10 {
		l.take("a")
		l.refund("a")
	}
	if v := l.take("a"); !v.ok || v.left != 1 {
		t.Fatalf("after refunded attempts: %+v, want ok with 1 left", v)
	}
	l.take("a")
	v1, v2 := l.take("a"), l.take("a")
	if v1.ok || !v1.first || v2.first || v1.wait != time.Second {
		t.Errorf("empty bucket: %+v then %+v; want refused, the first reported, wait 1s", v1, v2)
	}
	now = now.Add(time.Second)
	if v := l.take("a"); !v.ok || !v.throttle || v.refused != 1 {
		t.Errorf("after a refill: %+v, want ok, throttled before, 1 refusal unlogged", v)
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":             "127.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.1]:80":      "192.0.2.1",
		"@":                          "@",
		"":                           "",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
