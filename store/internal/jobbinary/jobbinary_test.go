package jobbinary

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// The property tests fill every field of Job by reflection, so a field added
// to Job and forgotten by the codec fails TestJobBinaryRoundTrip at once.
//
// Rule for slices: nil and empty encode alike and decode as nil; the
// expected side of each comparison is normalized to match (normalizeJob).

var timeType = reflect.TypeFor[time.Time]()

// randValue sets v, of any type Job is made of, to a random value.
func randValue(r *rand.Rand, v reflect.Value, now time.Time) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(randTime(r, now)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(randBytes(r)))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int, reflect.Int64:
		v.SetInt(randInt(r))
	case reflect.Uint64:
		v.SetUint(uint64(randInt(r)))
	case reflect.Pointer:
		if r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		randValue(r, p.Elem(), now)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(randBytes(r))
			return
		}
		var n int
		switch r.IntN(8) {
		case 0: // nil
			v.SetZero()
			return
		case 1:
			n = 0 // empty, not nil
		case 2:
			n = 10 + r.IntN(30)
		default:
			n = 1 + r.IntN(4)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			randValue(r, s.Index(i), now)
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			randValue(r, v.Field(i), now)
		}
	default:
		panic("randValue: no generator for " + v.Type().String())
	}
}

// randBytes returns nil, empty-non-nil, short, or now and then long bytes,
// arbitrary (not always valid UTF-8).
func randBytes(r *rand.Rand) []byte {
	var n int
	switch r.IntN(10) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		n = 100 + r.IntN(300)
	case 3:
		if r.IntN(20) == 0 {
			n = 5000 + r.IntN(5000) // above sharedStringsMax
		}
	default:
		n = 1 + r.IntN(24)
	}
	b := make([]byte, n)
	for i := range b {
		if r.IntN(4) == 0 {
			b[i] = byte(r.Uint32())
		} else {
			b[i] = 'a' + byte(r.IntN(26))
		}
	}
	return b
}

func randInt(r *rand.Rand) int64 {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return -1 - r.Int64N(1<<20)
	case 2:
		return int64(r.Uint64())
	case 3:
		return []int64{math.MinInt64, math.MaxInt64, -1, 63, 64, -64, -65, 127, 128}[r.IntN(9)]
	default:
		return r.Int64N(1000)
	}
}

func randTime(r *rand.Rand, now time.Time) time.Time {
	nsec := []int64{0, 1, 999_999_999, 500_000_000, r.Int64N(1e9)}[r.IntN(5)]
	switch r.IntN(8) {
	case 0:
		return time.Time{}
	case 1: // with a monotonic reading
		return now.Add(time.Duration(r.Int64N(1e15) - 5e14))
	case 2:
		return time.Unix(int64(r.Uint64()), nsec).UTC() // any second at all
	case 3:
		return time.Date(1+r.IntN(3), 1, 1, 0, 0, 0, int(nsec), time.UTC) // near the zero time
	case 4:
		return time.Unix(r.Int64N(1e11)-5e10, nsec).In(time.FixedZone("X", 3600*(r.IntN(25)-12)))
	default:
		return time.Unix(1.7e9+r.Int64N(1e9), nsec).UTC()
	}
}

// normalizeJob rewrites v the way the codec does: times in UTC without
// monotonic reading, every zero time as time.Time{}, empty slices as nil.
func normalizeJob(v reflect.Value) {
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		if t.IsZero() {
			v.SetZero()
		} else {
			v.Set(reflect.ValueOf(t.Round(0).UTC()))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalizeJob(v.Elem())
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		for i := range v.Len() {
			normalizeJob(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			normalizeJob(v.Field(i))
		}
	}
}

func randJob(r *rand.Rand, now time.Time) *store.Job {
	j := new(store.Job)
	randValue(r, reflect.ValueOf(j).Elem(), now)
	return j
}

func TestJobBinaryRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(20261129, 1))
	now := time.Now() // carries a monotonic reading, which the codec drops
	for i := range 2000 {
		j := randJob(r, now)
		enc := Append(nil, j)
		if again := Append([]byte("prefix"), j); !bytes.Equal(again[6:], enc) || string(again[:6]) != "prefix" {
			t.Fatalf("job %d: appending to a prefix gives %x; want prefix then %x", i, again, enc)
		}
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("job %d: Decode(Append(%+v)) err = %v", i, j, err)
		}
		normalizeJob(reflect.ValueOf(j).Elem())
		if !reflect.DeepEqual(got, j) {
			t.Fatalf("job %d: round trip\n got  %+v\n want %+v", i, got, j)
		}
		if re := Append(nil, got); !bytes.Equal(re, enc) {
			t.Fatalf("job %d: re-encoding the decoded job\n got  %x\n want %x", i, re, enc)
		}
		// The job must not share memory with the input.
		for k := range enc {
			enc[k] = 0xff
		}
		if !reflect.DeepEqual(got, j) {
			t.Fatalf("job %d: decoded job changed when its input was overwritten", i)
		}
	}
}

// TestJobBinaryFieldCounts fails when a type the codec writes gains or loses
// a field; the fix is to extend Append and Decode (new
// fields at the end) and bump binaryFormat.
func TestJobBinaryFieldCounts(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		want int
	}{
		{reflect.TypeFor[store.Job](), 34},
		{reflect.TypeFor[store.Request](), 4},
		{reflect.TypeFor[store.HeaderField](), 2},
		{reflect.TypeFor[store.Result](), 4},
		{reflect.TypeFor[store.Event](), 18},
	} {
		if got := tc.typ.NumField(); got != tc.want {
			t.Errorf("%s has %d fields; binary format %d encodes %d: update jobbinary.go and bump binaryFormat", tc.typ, got, binaryFormat, tc.want)
		}
	}
}

// goldenJob sets every field to a non-zero value.
func goldenJob() *store.Job {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	return &store.Job{
		ID: "01943b6a-8c00-7000-8000-000000000001", Key: "order-42", Fingerprint: "sha256:abc", State: store.StateNeedsAttention,
		Request: store.Request{Method: "POST", URL: "http://127.0.0.1:1/pay",
			Header: []store.HeaderField{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Empty", Value: ""}}, Body: []byte(`{"amount":1}`)},
		StatusURL: "http://127.0.0.1:1/ops/{key}", KeyTTL: 24 * time.Hour, MaxAttempts: 5,
		DeadlineAfter: time.Hour, AttemptTimeout: -time.Second, ReplaySafe: true, NoEffectStatuses: []int{503, -1},
		KeyFormat: "uuid", CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), NextRunAt: time.Unix(-1, 1).UTC(),
		Deadline: t0.Add(time.Hour), Attempts: 3, AttemptBase: 1, RetryBase: 2, StatusQueries: 4, StatusBase: 3,
		FirstSentAt: t0.Add(time.Second), UnknownSince: t0.Add(2 * time.Second), MayHaveEffect: true, Fence: 1 << 40,
		LastError: "eof", LastStatus: 502, LastClass: "unknown", Reason: "status budget exhausted",
		Result: &store.Result{HTTPStatus: 200, Body: []byte("ok"), Truncated: true, Source: "status_query"},
		History: []store.Event{
			{Kind: store.EventAttempt, N: 1, Start: t0, End: t0.Add(time.Millisecond), Class: "unknown", HTTPStatus: 502,
				Error: "bad gateway", RetryAfter: "5", Replayed: "true", Truncated: true, Delay: -2, DelayReason: "retry-after",
				Outcome: "o", Detail: "d", Actor: "a", Note: "n", From: store.StateRunning, To: store.StateUnknown},
			{Kind: store.EventManual},
		},
		HistoryDropped: 7,
	}
}

// goldenHex is the encoding of goldenJob. A change here is a format change:
// bump binaryFormat and keep decoding the old one.
const goldenHex = "012430313934336236612d386330302d373030302d383030302d303030303030303030303031086f726465722d34320a7368613235363a6162630f6e656564735f617474656e74696f6e04504f535416687474703a2f2f3132372e302e302e313a312f706179020c436f6e74656e742d54797065106170706c69636174696f6e2f6a736f6e07582d456d707479000c7b22616d6f756e74223a317d1c687474703a2f2f3132372e302e302e313a312f6f70732f7b6b65797d8080f89492a5270a8080c58bc6d101ffa7d6b9070102ee070104757569640180cfe0b00d959aef3a01f8cfe0b00d959aef3a01010101a087e1b00d959aef3a06020408060182cfe0b00d959aef3a0184cfe0b00d959aef3a0180808080802003656f66ec0707756e6b6e6f776e177374617475732062756467657420657868617573746564019003026f6b010c7374617475735f71756572790207617474656d7074020180cfe0b00d959aef3a0180cfe0b00dd59eac3b07756e6b6e6f776eec070b62616420676174657761790135047472756501030b72657472792d6166746572016f01640161016e0772756e6e696e6707756e6b6e6f776e066d616e75616c00000000000000000000000000000000000e"

func TestJobBinaryGolden(t *testing.T) {
	enc := Append(nil, goldenJob())
	if got := hex.EncodeToString(enc); got != goldenHex {
		t.Errorf("encoding of goldenJob changed:\n got  %s\n want %s", got, goldenHex)
	}
	want, _ := hex.DecodeString(goldenHex)
	j, err := Decode(want)
	if err != nil || !reflect.DeepEqual(j, goldenJob()) {
		t.Errorf("Decode(goldenHex) =\n %+v, %v\nwant\n %+v", j, err, goldenJob())
	}
}

// zeroJobBinary is the encoding of Job{}: the format byte (a job without
// an owner is written in format 1) and one zero byte for each of the 36
// top-level fields and Request fields.
func zeroJobBinary() []byte { return append([]byte{binaryFormatNoOwner}, make([]byte, 36)...) }

// splice returns the zero job encoding with byte i replaced by with.
func splice(i int, with ...byte) []byte {
	z := zeroJobBinary()
	return append(append(z[:i:i], with...), z[i+1:]...)
}

func TestDecodeJobBinaryErrors(t *testing.T) {
	if j, err := Decode(zeroJobBinary()); err != nil || !reflect.DeepEqual(j, &store.Job{}) {
		t.Fatalf("Decode(zero job) = %+v, %v; want Job{}, nil", j, err)
	}
	// Byte offsets in the zero job encoding.
	const (
		idAt       = 1
		headerAt   = 7
		replaySafe = 14
		noEffectAt = 15
		createdAt  = 17
		resultAt   = 34
		historyAt  = 35
		droppedAt  = 36
	)
	zeroSec := time.Time{}.Unix()
	nanosTooBig := binary.AppendUvarint(binary.AppendVarint([]byte{1}, 1), 1e9)
	zeroPresent := binary.AppendUvarint(binary.AppendVarint([]byte{1}, zeroSec), 0)
	oneEvent := splice(historyAt, append([]byte{1}, make([]byte, 18)...)...)
	badEvent := splice(historyAt, append([]byte{1}, make([]byte, 17)...)...)
	badEvent[historyAt+1+9] = 2 // the event's truncated flag
	cases := []struct {
		name string
		in   []byte
		msg  string // part of the message
	}{
		{"empty", nil, "empty binary job"},
		{"format 0", []byte{0}, "unknown binary job format 0"},
		{"format 3", []byte{3, 0, 0}, "format 3 is newer than this idemrun (2); upgrade idemrun"},
		{"format only", []byte{1}, "at id (byte 1): truncated"},
		{"truncated", zeroJobBinary()[:30], "truncated"},
		{"trailing bytes", append(zeroJobBinary(), 0), "at end (byte 37): 1 trailing bytes"},
		{"history count", splice(historyAt, append([]byte{2}, make([]byte, 18)...)...), "history (byte 35): count 2 exceeds what the 19 bytes left can hold"},
		{"long varint", splice(idAt, 0x80, 0x00), "at id (byte 1): varint not in its shortest form"},
		{"varint overflow", splice(droppedAt, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), "history_dropped (byte 36): varint overflows"},
		{"string too long", []byte{1, 5, 'a', 'b'}, "at id (byte 1): length 5 exceeds the 2 bytes left"},
		{"hostile string length", splice(idAt, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "exceeds the"},
		{"hostile header count", splice(headerAt, 0xff, 0xff, 0xff, 0xff, 0x0f), "request.header (byte 7): count 4294967295 exceeds what the 29 bytes left"},
		{"header count", splice(headerAt, 15), "count 15 exceeds what the 29 bytes left can hold"},
		{"no-effect count", splice(noEffectAt, 30), "no_effect_statuses"},
		{"hostile history count", splice(historyAt, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "history (byte 35): count 18446744073709551615 exceeds"},
		{"bool 2", splice(replaySafe, 2), "replay_safe (byte 14): flag byte 2 is neither 0 nor 1"},
		{"result flag 3", splice(resultAt, 3), "at result"},
		{"event flag", badEvent, "history[0].truncated"},
		{"nanos", splice(createdAt, nanosTooBig...), "created_at (byte 17): nanoseconds 1000000000 not below one second"},
		{"zero time present", splice(createdAt, zeroPresent...), "created_at (byte 17): zero time marked present"},
	}
	for _, tc := range cases {
		j, err := Decode(tc.in)
		if j != nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Decode(%s) = %v, %v; want ErrCorrupt mentioning %q", tc.name, j, err, tc.msg)
		}
	}
	if j, err := Decode(oneEvent); err != nil || len(j.History) != 1 {
		t.Errorf("Decode(one zero event) = %+v, %v; want one event", j, err)
	}
}

// TestDecodeJobBinaryTruncations checks that every proper prefix of a valid
// encoding is refused.
func TestDecodeJobBinaryTruncations(t *testing.T) {
	enc := Append(nil, goldenJob())
	for n := range len(enc) {
		if j, err := Decode(enc[:n]); j != nil || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode(first %d of %d bytes) = %v, %v; want ErrCorrupt", n, len(enc), j, err)
		}
	}
}

// TestDecodeJobBinaryHostileCountAllocs checks that a count far beyond the
// input is refused before anything of its size is allocated.
func TestDecodeJobBinaryHostileCountAllocs(t *testing.T) {
	for _, in := range [][]byte{
		splice(35, 0x80, 0x80, 0x80, 0x80, 0x10), // 4 Gi history events
		splice(35, 0x80, 0x80, 0x40),             // 1 Mi history events
		splice(7, 0x80, 0x80, 0x40),              // 1 Mi header fields
		splice(15, 0x80, 0x80, 0x40),             // 1 Mi no-effect statuses
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if j, err := Decode(in); err == nil {
				t.Fatalf("Decode(%x) = %+v, nil; want an error", in, j)
			}
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
			t.Errorf("10 decodes of %x allocated %d bytes; want at most 64 KiB", in, got)
		}
	}
}

// FuzzBinaryRecord checks that Decode never panics, refuses bad
// input with ErrCorrupt, and that the encoding is canonical: whatever
// decodes encodes back to the same bytes.
func FuzzBinaryRecord(f *testing.F) {
	f.Add(Append(nil, goldenJob()))
	f.Add(Append(nil, typicalJob()))
	f.Add(zeroJobBinary())
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || j != nil {
				t.Fatalf("Decode(%x) = %v, %v; want nil and ErrCorrupt", b, j, err)
			}
			return
		}
		if re := Append(nil, j); !bytes.Equal(re, b) {
			t.Fatalf("Decode(%x) encodes back as\n %x", b, re)
		}
	})
}

// typicalJob is a job as the throughput benchmark makes them: a POST with
// two headers and a 40-byte body, two history events, a small result.
func typicalJob() *store.Job {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	return &store.Job{
		ID: "01943b6a-8c00-7000-8000-000000000001", Key: "a1b2c3d4-e5f6-4711-8899-aabbccddeeff",
		Fingerprint: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", State: store.StateSucceeded,
		Request: store.Request{Method: "POST", URL: "http://127.0.0.1:8080/v1/payments",
			Header: []store.HeaderField{{Name: "Content-Type", Value: "application/json"}, {Name: "Idempotency-Key", Value: "a1b2c3d4-e5f6-4711-8899-aabbccddeeff"}},
			Body:   []byte(`{"amount":1000,"currency":"eur","id":42}`)},
		MaxAttempts: 5, DeadlineAfter: time.Hour, AttemptTimeout: 30 * time.Second,
		CreatedAt: t0, UpdatedAt: t0.Add(40 * time.Millisecond), NextRunAt: t0, Deadline: t0.Add(time.Hour),
		Attempts: 1, FirstSentAt: t0.Add(time.Millisecond), Fence: 2,
		Result: &store.Result{HTTPStatus: 201, Body: []byte(`{"id":"pay_123","status":"ok"}`), Source: "attempt"},
		History: []store.Event{
			{Kind: store.EventAttempt, N: 1, Start: t0.Add(time.Millisecond), End: t0.Add(39 * time.Millisecond), Class: "success", HTTPStatus: 201},
			{Kind: store.EventSchedule, Start: t0, Delay: 0, From: store.StatePending, To: store.StateRunning},
		},
	}
}

func BenchmarkJobBinaryEncode(b *testing.B) {
	j := typicalJob()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(Append(nil, j))
	}
	b.ReportMetric(float64(n), "bytes/job")
}

func BenchmarkJobBinaryDecode(b *testing.B) {
	rec := Append(nil, typicalJob())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJobJSONEncode(b *testing.B) {
	j := typicalJob()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		rec, err := json.Marshal(j)
		if err != nil {
			b.Fatal(err)
		}
		n = len(rec)
	}
	b.ReportMetric(float64(n), "bytes/job")
}

func BenchmarkJobJSONDecode(b *testing.B) {
	rec, err := json.Marshal(typicalJob())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var j store.Job
		if err := json.Unmarshal(rec, &j); err != nil {
			b.Fatal(err)
		}
	}
}

// A job with an owner is written in format 2, the owner last; one without
// keeps format 1's bytes, which older versions wrote and read. Format 2
// with an empty owner is not canonical and is refused.
func TestJobBinaryOwnerFormat(t *testing.T) {
	j := &store.Job{Owner: "runner-1"}
	b := Append(nil, j)
	if b[0] != 2 {
		t.Fatalf("format of a job with an owner = %d; want 2", b[0])
	}
	got, err := Decode(b)
	if err != nil || got.Owner != "runner-1" {
		t.Fatalf("decode(format 2) = %+v, %v; want owner runner-1", got, err)
	}
	if !bytes.Equal(Append(nil, got), b) {
		t.Errorf("format 2 does not encode back to its own bytes")
	}
	if b := Append(nil, &store.Job{}); b[0] != 1 {
		t.Errorf("format of a job without an owner = %d; want 1", b[0])
	}
	empty := append(append([]byte{2}, zeroJobBinary()[1:]...), 0)
	if _, err := Decode(empty); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "owner") {
		t.Errorf("decode(format 2, empty owner) err = %v; want a corrupt record at owner", err)
	}
}
