package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemrun/idemrun/store"
)

// TestQueriesComplete: every statement has the schema filled in.
func TestQueriesComplete(t *testing.T) {
	q := newQueries(`we"ird`)
	v := reflect.ValueOf(q)
	if n := len(q.all()); n != v.NumField() {
		t.Fatalf("queries.all lists %d statements; queries has %d", n, v.NumField())
	}
	for i := range v.NumField() {
		s, name := v.Field(i).String(), v.Type().Field(i).Name
		tables := name != "advisoryXact" // the one statement that names no table
		if s == "" || strings.Contains(s, "{schema}") || tables != strings.Contains(s, `"we""ird"`) {
			t.Errorf("statement %s = %q; want the quoted schema filled in", name, s)
		}
	}
}

func TestASCIIJSON(t *testing.T) {
	for _, s := range []string{"plain", "naïve", "日本", "🔑 key", "\u2028", "nul \x00", ""} {
		b, err := json.Marshal(map[string]string{"v": s})
		if err != nil {
			t.Fatal(err)
		}
		a := asciiJSON(b)
		for _, c := range a {
			if c >= 0x80 {
				t.Fatalf("asciiJSON(%q) = %q: not ASCII", b, a)
			}
		}
		var back map[string]string
		if err := json.Unmarshal(a, &back); err != nil || back["v"] != s {
			t.Errorf("asciiJSON(%q) = %q decodes to %q, %v; want %q", b, a, back["v"], err, s)
		}
	}
}

// TestNanos: times keep their order as nanoseconds, the zero time first,
// far dates saturated; the cursor key is store/bolt's.
func TestNanos(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	ordered := []time.Time{{}, time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), base.Add(-time.Nanosecond), base, base.Add(time.Nanosecond), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(ordered); i++ {
		if nanos(ordered[i-1]) >= nanos(ordered[i]) {
			t.Errorf("nanos(%v) = %d, not below nanos(%v) = %d", ordered[i-1], nanos(ordered[i-1]), ordered[i], nanos(ordered[i]))
		}
	}
	if got := fromNanos(nanos(base)); !got.Equal(base) {
		t.Errorf("fromNanos(nanos(%v)) = %v", base, got)
	}
	if !fromNanos(nanos(time.Time{})).IsZero() {
		t.Errorf("the zero time does not come back zero")
	}
	if k := uint64(nanos(time.Time{})) ^ 1<<63; k != 0 {
		t.Errorf("cursor key of the zero time = %d; want 0, as store/bolt's", k)
	}
	if nanos(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MaxInt64 {
		t.Errorf("a date past 2262 does not saturate")
	}
}

// jsonRecord is j's record as idemrun wrote it before schema version 4:
// store.Job's JSON, non-ASCII escaped.
func jsonRecord(t *testing.T, j *store.Job) string {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return string(asciiJSON(b))
}

// TestDecodeRefusesUnknownFields: a JSON record (written before schema
// version 4) with a field this idemrun does not know was written by a
// newer one; it is refused, not dropped.
func TestDecodeRefusesUnknownFields(t *testing.T) {
	j := &store.Job{ID: store.NewID(), Key: "k", State: store.StatePending}
	rec := jsonRecord(t, j)
	if _, err := decodeJob([]byte(rec)); err != nil {
		t.Fatalf("decodeJob of a JSON record: %v", err)
	}
	newer := strings.Replace(rec, `{`, `{"added_later":1,`, 1)
	if _, err := decodeJob([]byte(newer)); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("decodeJob(%s) = %v; want a refusal", newer, err)
	}
	bin, err := encodeJob(j)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeJob(bin); err != nil || got.ID != j.ID {
		t.Fatalf("decodeJob of a binary record = %v, %v", got, err)
	}
	if _, err := decodeJob(append(bin, 0)); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("decodeJob of a binary record with a trailing byte = %v; want ErrCorruptRecord", err)
	}
	if _, err := encodeJob(&store.Job{ID: j.ID, State: "bogus"}); err == nil {
		t.Errorf("encodeJob of an unknown state = nil error")
	}
}

func TestRedactor(t *testing.T) {
	const pw = "p@ss:w/rd"
	for _, raw := range []string{
		"postgres://u:p%40ss%3Aw%2Frd@db.example:5432/app",
		"postgres://u:p@ss:w/rd@db.example:5432/app",
		"postgres://u@db.example/app?password=p%40ss%3Aw%2Frd",
		"host=db.example password='p@ss:w/rd'",
		"host=db.example password=p@ss:w/rd",
	} {
		r := newRedactor(raw)
		for _, shown := range []string{r.location(), r.scrub("failed: " + pw + " / " + raw)} {
			if strings.Contains(shown, pw) || strings.Contains(shown, "p%40ss") || strings.Contains(shown, "ss:w") {
				t.Errorf("newRedactor(%q) shows the password: %q", raw, shown)
			}
		}
	}
	if loc := newRedactor("postgres://u@db.example:5432/app?sslmode=disable").location(); loc != "postgres://u@db.example:5432/app?sslmode=disable" {
		t.Errorf("location of a URL without a password = %q; want it unchanged", loc)
	}
}

// TestChannelName: a channel is a valid identifier of at most 63 bytes,
// one for each schema, also of schemas that share a long prefix.
func TestChannelName(t *testing.T) {
	long := strings.Repeat("é", 31) // 62 bytes
	seen := map[string]string{}
	for _, s := range []string{"idemrun", `We"ird Schema`, long, long[:60] + "a", long[:60] + "b", strings.Repeat("x", 63)} {
		c := channelName(s)
		if len(c) > 63 || !utf8.ValidString(c) || !strings.HasPrefix(c, "idemrun.") {
			t.Errorf("channelName(%q) = %q: want valid UTF-8 of at most 63 bytes, starting idemrun.", s, c)
		}
		if o, ok := seen[c]; ok {
			t.Errorf("schemas %q and %q share channel %q", o, s, c)
		}
		seen[c] = s
	}
	if c := channelName("idemrun"); c != "idemrun.idemrun" {
		t.Errorf("channelName(idemrun) = %q; want the schema named in it", c)
	}
}

// TestClassify: what a caller may do about each kind of error: nothing
// different for the server's refusal of a statement or the caller's own
// cancellation before COMMIT; try again for a lost connection before
// COMMIT; the outcome unknown once a COMMIT may have reached the server.
func TestClassify(t *testing.T) {
	refused := &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: "duplicate key"}
	shutdown := &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, c := range []struct {
		name    string
		err     error
		commits bool
		want    error // nil: unchanged
	}{
		{"refused", refused, false, nil},
		{"refused at commit", refused, true, nil},
		{"shutdown", shutdown, false, store.ErrUnavailable},
		{"shutdown at commit", shutdown, true, store.ErrCommitUnknown},
		{"reset", fmt.Errorf("x: %w", reset), false, store.ErrUnavailable},
		{"reset at commit", reset, true, store.ErrCommitUnknown},
		{"eof at commit", io.ErrUnexpectedEOF, true, store.ErrCommitUnknown},
		{"closed at commit", pgconn.ErrConnClosed, true, store.ErrCommitUnknown},
		{"canceled", context.Canceled, false, nil},
		{"canceled at commit", context.Canceled, true, store.ErrCommitUnknown},
		{"plain", errors.New("store: a refusal of ours"), true, nil},
	} {
		got := classify(c.err, c.commits)
		for _, kind := range []error{store.ErrUnavailable, store.ErrCommitUnknown} {
			if errors.Is(got, kind) != (kind == c.want) {
				t.Errorf("%s: classify = %v; errors.Is(%v) = %v", c.name, got, kind, errors.Is(got, kind))
			}
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: classify lost the error it marks", c.name)
		}
	}
}
