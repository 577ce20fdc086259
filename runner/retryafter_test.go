package runner

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	// Sunday, 1 June 2025, 12:00:00 UTC.
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		values []string
		now    time.Time
		want   time.Duration
		wantOK bool
	}{
		{"seconds", []string{"120"}, now, 120 * time.Second, true},
		{"zero", []string{"0"}, now, 0, true},
		{"leading zeros", []string{"0000000000000000000000000120"}, now, 120 * time.Second, true},
		{"negative", []string{"-5"}, now, 0, false},
		{"fraction", []string{"1.5"}, now, 0, false},
		{"plus sign", []string{"+3"}, now, 0, false},
		{"unit", []string{"5s"}, now, 0, false},
		{"empty", []string{""}, now, 0, false},
		{"only spaces", []string{"   "}, now, 0, false},
		{"surrounding spaces", []string{"  7  "}, now, 7 * time.Second, true},
		{"surrounding tabs", []string{"\t7\t"}, now, 7 * time.Second, true},
		{"inner space", []string{"7 8"}, now, 0, false},
		{"comma list", []string{"7, 8"}, now, 0, false},
		{"hex", []string{"0x10"}, now, 0, false},
		{"underscore", []string{"1_000"}, now, 0, false},
		{"non-ascii digit", []string{"\u0663"}, now, 0, false},
		{"word", []string{"soon"}, now, 0, false},
		{"exactly the clamp", []string{"3153600000"}, now, MaxRetryAfter, true},
		{"one over the clamp", []string{"3153600001"}, now, MaxRetryAfter, true},
		{"overflows times second", []string{"9223372037"}, now, MaxRetryAfter, true},
		{"more digits than int64", []string{"99999999999999999999"}, now, MaxRetryAfter, true},
		{"many digits then junk", []string{"99999999999999999999x"}, now, 0, false},
		{"IMF-fixdate", []string{"Sun, 01 Jun 2025 12:02:00 GMT"}, now, 2 * time.Minute, true},
		{"RFC 850", []string{"Sunday, 01-Jun-25 12:02:00 GMT"}, now, 2 * time.Minute, true},
		{"asctime", []string{"Sun Jun  1 12:02:00 2025"}, now, 2 * time.Minute, true},
		{"date with spaces around", []string{"  Sun, 01 Jun 2025 12:00:30 GMT\t"}, now, 30 * time.Second, true},
		{"date equal to now", []string{"Sun, 01 Jun 2025 12:00:00 GMT"}, now, 0, true},
		{"past date", []string{"Sun, 06 Nov 1994 08:49:37 GMT"}, now, 0, true},
		{"100 years ahead", []string{"Fri, 01 Jun 2125 12:00:00 GMT"}, now, MaxRetryAfter, true},
		{"year 9999", []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, now, MaxRetryAfter, true},
		{"date not GMT", []string{"Sun, 01 Jun 2025 12:02:00 PST"}, now, 0, false},
		{"date garbage after", []string{"Sun, 01 Jun 2025 12:02:00 GMT x"}, now, 0, false},
		{"ISO date", []string{"2025-06-01T12:02:00Z"}, now, 0, false},
		{
			"RFC 850 year 70 read in 2030 is 2070",
			[]string{"Wednesday, 01-Jan-70 00:00:00 GMT"},
			time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2070, 1, 1, 0, 0, 0, 0, time.UTC).Sub(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
			true,
		},
		{"RFC 850 year 80 read in 2025 is 1980", []string{"Tuesday, 01-Jan-80 00:00:00 GMT"}, now, 0, true},
		{
			"RFC 850 year 94 read in 1994",
			[]string{"Sunday, 06-Nov-94 08:49:47 GMT"},
			time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC),
			10 * time.Second,
			true,
		},
		{"no values", nil, now, 0, false},
		{"empty list", []string{}, now, 0, false},
		{"two agreeing", []string{"120", "120"}, now, 120 * time.Second, true},
		{"two agreeing as seconds and date", []string{"120", "Sun, 01 Jun 2025 12:02:00 GMT"}, now, 120 * time.Second, true},
		{"two disagreeing, larger last", []string{"60", "120"}, now, 120 * time.Second, true},
		{"two disagreeing, larger first", []string{"120", "60"}, now, 120 * time.Second, true},
		{"date larger than seconds", []string{"60", "Sun, 01 Jun 2025 12:05:00 GMT"}, now, 5 * time.Minute, true},
		{"zero and positive", []string{"0", "30"}, now, 30 * time.Second, true},
		{"valid then invalid", []string{"30", "abc"}, now, 30 * time.Second, true},
		{"invalid then valid", []string{"-1", "30"}, now, 30 * time.Second, true},
		{"empty then valid", []string{"", "0"}, now, 0, true},
		{"all invalid", []string{"", "abc", "-1"}, now, 0, false},
	}
	for _, tt := range tests {
		got, gotOK := ParseRetryAfter(tt.values, tt.now)
		if got != tt.want || gotOK != tt.wantOK {
			t.Errorf("%s: ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.name, tt.values, got, gotOK, tt.want, tt.wantOK)
		}
	}
}

func TestMaxRetryAfterIsWholeSecondsAndFits(t *testing.T) {
	t.Parallel()
	if got := MaxRetryAfter % time.Second; got != 0 {
		t.Errorf("MaxRetryAfter %% time.Second = %v, want 0", got)
	}
	if got, want := MaxRetryAfter, 876000*time.Hour; got != want {
		t.Errorf("MaxRetryAfter = %v, want %v", got, want)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzParseRetryAfter.
	f.Fuzz(func(t *testing.T, a, b string, nowUnix int64) {
		now := time.Unix(nowUnix, 0).UTC()
		dA, okA := ParseRetryAfter([]string{a}, now)
		dB, okB := ParseRetryAfter([]string{b}, now)
		d, ok := ParseRetryAfter([]string{a, b}, now)
		for _, r := range []struct {
			d  time.Duration
			ok bool
		}{{dA, okA}, {dB, okB}, {d, ok}} {
			if r.d < 0 || r.d > MaxRetryAfter {
				t.Fatalf("ParseRetryAfter(%q, %q, %v) gave %v, want within [0, %v]", a, b, now, r.d, MaxRetryAfter)
			}
			if !r.ok && r.d != 0 {
				t.Fatalf("ParseRetryAfter(%q, %q, %v) gave %v with ok=false, want 0", a, b, now, r.d)
			}
		}
		wantD := time.Duration(0)
		if okA {
			wantD = dA
		}
		if okB && dB > wantD {
			wantD = dB
		}
		if d != wantD || ok != (okA || okB) {
			t.Fatalf("ParseRetryAfter(%q, %q) = %v, %v; want %v, %v (the larger valid one)", a, b, d, ok, wantD, okA || okB)
		}
		raCheckSeconds(t, a, dA, okA)
	})
}

// raCheckSeconds compares a delay-seconds value with strconv's answer.
func raCheckSeconds(t *testing.T, v string, d time.Duration, ok bool) {
	t.Helper()
	trimmed := strings.Trim(v, " \t")
	if trimmed == "" || strings.Trim(trimmed, "0123456789") != "" {
		return
	}
	want := MaxRetryAfter
	if n, err := strconv.ParseUint(trimmed, 10, 64); err == nil && n <= uint64(MaxRetryAfter/time.Second) {
		want = time.Duration(n) * time.Second
	}
	if d != want || !ok {
		t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true", v, d, ok, want)
	}
}

func BenchmarkParseRetryAfter(b *testing.B) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	values := []string{"120", "Sun, 01 Jun 2025 12:02:00 GMT"}
	for b.Loop() {
		if _, ok := ParseRetryAfter(values, now); !ok {
			b.Fatal("ParseRetryAfter: ok = false, want true")
		}
	}
}
