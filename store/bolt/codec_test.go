package bolt

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/internal/jobbinary"
)

// FuzzDecodeRecord checks that DecodeRecord never panics, refuses bad input
// with ErrCorruptRecord, and that whatever it accepts the store can write
// back: the job re-encodes, and decoding that record gives the same job.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	valid := &store.Job{ID: "01943b6a-8c00-7000-8000-000000000001", Key: "order-42", Fingerprint: "sha256:abc", State: store.StateUnknown,
		Request:   store.Request{Method: "POST", URL: "http://127.0.0.1:1/pay", Header: []store.HeaderField{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"amount":1}`)},
		CreatedAt: now, UpdatedAt: now, NextRunAt: now.Add(time.Second), Deadline: now.Add(time.Hour), Fence: 3, Attempts: 2,
		History: []store.Event{{Kind: store.EventAttempt, N: 1, Start: now, End: now, Class: "unknown"}}}
	if rec, err := encodeJob(valid); err == nil {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("DecodeRecord(%q) err = %v; want errors.Is ErrCorruptRecord", b, err)
			}
			if j != nil {
				t.Fatalf("DecodeRecord(%q) returned a job with its error", b)
			}
			return
		}
		rec, err := encodeJob(j)
		if err != nil {
			t.Fatalf("DecodeRecord(%q) accepted a job that does not encode again: %v", b, err)
		}
		j2, err := DecodeRecord(rec)
		if err != nil {
			t.Fatalf("re-encoded record %q does not decode: %v", rec, err)
		}
		rec2, err := encodeJob(j2)
		if err != nil || !bytes.Equal(rec, rec2) {
			t.Fatalf("second encoding differs:\n got  %q, %v\n want %q", rec2, err, rec)
		}
		j3, err := DecodeRecord(rec2)
		if err != nil || !reflect.DeepEqual(j2, j3) {
			t.Fatalf("decoding the same record twice differs:\n got  %+v, %v\n want %+v", j3, err, j2)
		}
		if _, err := idBytes(j.ID); err != nil {
			t.Fatalf("decoded job has an id the store cannot key: %q", j.ID)
		}
	})
}

func TestDecodeRecordErrors(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	good := &store.Job{ID: "01943b6a-8c00-7000-8000-000000000001", Key: "k", Fingerprint: "f", State: store.StatePending,
		CreatedAt: now, UpdatedAt: now, NextRunAt: now}
	rec, err := encodeJob(good)
	if err != nil {
		t.Fatal(err)
	}
	withBody := func(mod func(j *store.Job)) string {
		j := *good
		mod(&j)
		return string(rec[:headLen]) + string(jobbinary.Append(nil, &j))
	}
	flipHead := append([]byte(nil), rec...)
	flipHead[1] = stateByte[store.StateSucceeded]
	cases := []struct {
		name string
		in   string
		msg  string // part of the message
	}{
		{"empty", "", "empty record"},
		{"version only", "\x01", "bad record head (1 bytes)"},
		{"version 0", "\x00" + string(rec[1:]), "unknown record version 0"},
		{"version 2", "\x02" + string(rec[1:]), "upgrade idemrun"},
		{"bad head state", "\x01\x09" + string(rec[2:]), "bad record head"},
		{"truncated", string(rec[:len(rec)-3]), "truncated"},
		{"trailing bytes", string(rec) + "xx", "trailing bytes"},
		{"bad id", withBody(func(j *store.Job) { j.ID = "x" }), "bad id"},
		{"bad state", withBody(func(j *store.Job) { j.State = "done" }), `unknown state "done"`},
		{"head disagrees", string(flipHead), "head disagrees"},
	}
	for _, tc := range cases {
		j, err := DecodeRecord([]byte(tc.in))
		if j != nil || !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("DecodeRecord(%s) = %v, %v; want ErrCorruptRecord mentioning %q", tc.name, j, err, tc.msg)
		}
	}
}

func TestTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, 0).UTC(),
		time.Unix(0, 1).UTC(),
		time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i, tm := range times {
		k := timeKey(tm)
		if got := timeFromKey(k); !got.Equal(tm) {
			t.Errorf("timeFromKey(timeKey(%v)) = %v; want %v", tm, got, tm)
		}
		if i > 0 && k <= timeKey(times[i-1]) {
			t.Errorf("timeKey(%v) = %x is not above timeKey(%v) = %x", tm, k, times[i-1], timeKey(times[i-1]))
		}
	}
}
