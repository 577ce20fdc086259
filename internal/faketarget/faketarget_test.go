package faketarget

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/idemkey"
)

func TestCreateAnswers201(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, testTimeout)
	tests := []struct {
		name, key, body, wantAmount string
	}{
		{"json amount", "k-json", `{"amount": 1200, "currency":"eur"}`, "1200"},
		{"json object amount", "k-obj", `{"amount":{ "value": 5 }}`, `{"value":5}`},
		{"json without amount", "k-none", `{"currency":"eur"}`, ""},
		{"not json", "k-text", `amount=5`, ""},
		{"empty body", "k-empty", ``, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(c, s.URL(), tt.key, tt.body)
			if r.err != nil || r.code != http.StatusCreated {
				t.Fatalf("POST: got %d %q err %v, want 201", r.code, r.body, r.err)
			}
			if got := r.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", got)
			}
			p := decodePayment(t, r.body)
			want := Payment{ID: "pay_" + string(rune('1'+i)), Key: tt.key, Status: "succeeded", Amount: json.RawMessage(tt.wantAmount)}
			if p.ID != want.ID || p.Key != want.Key || p.Status != want.Status || string(p.Amount) != string(want.Amount) {
				t.Errorf("payment: got %+v (amount %s), want %+v (amount %s)", p, p.Amount, want, want.Amount)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(r.body, &raw); err != nil {
				t.Fatal(err)
			}
			if _, has := raw["amount"]; has != (tt.wantAmount != "") {
				t.Errorf("amount present: got %v, want %v (body %s)", has, tt.wantAmount != "", r.body)
			}
			if got := s.Creates(tt.key); got != 1 {
				t.Errorf("Creates: got %d, want 1", got)
			}
			if got := s.Payments(tt.key); len(got) != 1 || got[0].ID != p.ID {
				t.Errorf("Payments: got %+v, want [%+v]", got, p)
			}
		})
	}
	if got, want := s.Requests().Answered2xx, len(tests); got != want {
		t.Errorf("Answered2xx: got %d, want %d", got, want)
	}
}

func TestRejectedRequests(t *testing.T) {
	s := startServer(t, Config{Dedup: true})
	c := newClient(t, testTimeout)
	tests := []struct {
		name     string
		req      func() (*http.Request, error)
		wantCode int
		wantBody string // exact, when not empty
	}{
		{"missing key", func() (*http.Request, error) {
			return http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{}`))
		}, http.StatusBadRequest, `{"error":"missing Idempotency-Key"}` + "\n"},
		{"empty key", func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{}`))
			if err == nil {
				r.Header.Set(idemkey.HeaderName, "  ")
			}
			return r, err
		}, http.StatusBadRequest, `{"error":"missing Idempotency-Key"}` + "\n"},
		{"key with a space", func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{}`))
			if err == nil {
				r.Header.Set(idemkey.HeaderName, `"a b"`)
			}
			return r, err
		}, http.StatusBadRequest, `{"error":"invalid Idempotency-Key"}` + "\n"},
		{"bad sf-string escape", func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{}`))
			if err == nil {
				r.Header.Set(idemkey.HeaderName, `"a\b"`)
			}
			return r, err
		}, http.StatusBadRequest, `{"error":"invalid Idempotency-Key"}` + "\n"},
		{"key sent twice", func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{}`))
			if err == nil {
				r.Header.Add(idemkey.HeaderName, "k1")
				r.Header.Add(idemkey.HeaderName, "k2")
			}
			return r, err
		}, http.StatusBadRequest, ""},
		{"body one byte over the cap", func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, s.URL()+"/payments", bytes.NewReader(make([]byte, MaxBodyBytes+1)))
			if err == nil {
				r.Header.Set(idemkey.HeaderName, "big")
			}
			return r, err
		}, http.StatusRequestEntityTooLarge, `{"error":"request body too large"}` + "\n"},
		{"GET /payments", func() (*http.Request, error) {
			return http.NewRequest(http.MethodGet, s.URL()+"/payments", nil)
		}, http.StatusMethodNotAllowed, ""},
		{"POST status", func() (*http.Request, error) {
			return http.NewRequest(http.MethodPost, s.URL()+"/payments/by-key/x", nil)
		}, http.StatusMethodNotAllowed, ""},
		{"unknown path", func() (*http.Request, error) {
			return http.NewRequest(http.MethodGet, s.URL()+"/nope", nil)
		}, http.StatusNotFound, `{"error":"not found"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.req()
			if err != nil {
				t.Fatal(err)
			}
			r := do(c, req)
			if r.err != nil || r.code != tt.wantCode {
				t.Fatalf("got %d %q err %v, want %d", r.code, r.body, r.err, tt.wantCode)
			}
			if tt.wantBody != "" && string(r.body) != tt.wantBody {
				t.Errorf("body: got %q, want %q", r.body, tt.wantBody)
			}
		})
	}
	if got := s.TotalCreates(); got != 0 {
		t.Errorf("TotalCreates: got %d, want 0", got)
	}
	got := s.Requests()
	if got.BadRequest400 != 5 || got.TooLarge413 != 1 || got.Posts != 6 {
		t.Errorf("counters: got 400=%d 413=%d posts=%d, want 5, 1, 6", got.BadRequest400, got.TooLarge413, got.Posts)
	}

	r := post(c, s.URL(), "max", string(make([]byte, MaxBodyBytes)))
	if r.err != nil || r.code != http.StatusCreated {
		t.Errorf("body of exactly MaxBodyBytes: got %d err %v, want 201", r.code, r.err)
	}
}

func TestStructuredKeyIsTheSameKey(t *testing.T) {
	s := startServer(t, Config{Dedup: true})
	c := newClient(t, testTimeout)
	key := `k"1\`
	r1 := post(c, s.URL(), idemkey.FormatHeader(key, idemkey.FormatStructured), `{"amount":1}`)
	r2 := post(c, s.URL(), idemkey.FormatHeader(key, idemkey.FormatToken), `{"amount":1}`)
	if r1.code != http.StatusCreated || r2.code != http.StatusCreated {
		t.Fatalf("codes: got %d %d (%v %v), want 201 201", r1.code, r2.code, r1.err, r2.err)
	}
	if got := r2.header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("second answer Idempotent-Replayed: got %q, want true", got)
	}
	if got := s.CreatesByKey(); len(got) != 1 || got[key] != 1 {
		t.Errorf("CreatesByKey: got %v, want map[%s:1]", got, key)
	}
}

func TestDedupOnOff(t *testing.T) {
	tests := []struct {
		dedup          bool
		wantCreates    int
		wantReplayed   string
		wantDuplicates []string
	}{
		{dedup: true, wantCreates: 1, wantReplayed: "true", wantDuplicates: nil},
		{dedup: false, wantCreates: 2, wantReplayed: "", wantDuplicates: []string{"k"}},
	}
	for _, tt := range tests {
		t.Run(map[bool]string{true: "on", false: "off"}[tt.dedup], func(t *testing.T) {
			s := startServer(t, Config{Dedup: tt.dedup})
			c := newClient(t, testTimeout)
			r1 := post(c, s.URL(), "k", `{"amount":7}`)
			r2 := post(c, s.URL(), "k", `{"amount":7}`)
			if r1.code != http.StatusCreated || r2.code != http.StatusCreated {
				t.Fatalf("codes: got %d %d (%v %v), want 201 201", r1.code, r2.code, r1.err, r2.err)
			}
			if got := r1.header.Get("Idempotent-Replayed"); got != "" {
				t.Errorf("first Idempotent-Replayed: got %q, want none", got)
			}
			if got := r2.header.Get("Idempotent-Replayed"); got != tt.wantReplayed {
				t.Errorf("second Idempotent-Replayed: got %q, want %q", got, tt.wantReplayed)
			}
			p1, p2 := decodePayment(t, r1.body), decodePayment(t, r2.body)
			if got := p1.ID == p2.ID; got != tt.dedup {
				t.Errorf("same id: got %v (%s, %s), want %v", got, p1.ID, p2.ID, tt.dedup)
			}
			if got := s.Creates("k"); got != tt.wantCreates {
				t.Errorf("Creates: got %d, want %d", got, tt.wantCreates)
			}
			if got := s.TotalCreates(); got != tt.wantCreates {
				t.Errorf("TotalCreates: got %d, want %d", got, tt.wantCreates)
			}
			if got := s.Duplicates(); !slices.Equal(got, tt.wantDuplicates) {
				t.Errorf("Duplicates: got %v, want %v", got, tt.wantDuplicates)
			}
			if got := len(s.BodiesByKey("k")); got != 2 {
				t.Errorf("BodiesByKey: got %d bodies, want 2", got)
			}

			st := get(c, statusURL(s, "k"))
			if st.err != nil || st.code != http.StatusOK {
				t.Fatalf("status: got %d %q err %v, want 200", st.code, st.body, st.err)
			}
			a := decodeStatus(t, st.body)
			if tt.dedup {
				if a.ID != p1.ID || a.Status != "succeeded" || a.Data != nil {
					t.Errorf("status: got %+v, want the payment %s", a, p1.ID)
				}
			} else if len(a.Data) != 2 || a.Data[0].ID != p1.ID || a.Data[1].ID != p2.ID {
				t.Errorf("status: got %+v, want data [%s %s]", a, p1.ID, p2.ID)
			}
		})
	}
}

func TestDedupMismatch422(t *testing.T) {
	s := startServer(t, Config{Dedup: true})
	c := newClient(t, testTimeout)
	if r := post(c, s.URL(), "k", `{"amount":1}`); r.code != http.StatusCreated {
		t.Fatalf("first: got %d err %v, want 201", r.code, r.err)
	}
	r := post(c, s.URL(), "k", `{"amount":2}`)
	if r.code != http.StatusUnprocessableEntity {
		t.Fatalf("different body: got %d %q err %v, want 422", r.code, r.body, r.err)
	}
	if got := s.Creates("k"); got != 1 {
		t.Errorf("Creates: got %d, want 1", got)
	}
	if got := s.Requests().Mismatch422; got != 1 {
		t.Errorf("Mismatch422: got %d, want 1", got)
	}
}

// TestSlowCommitProcessingThen409 keeps a slow create in flight (a delay far
// longer than the test), checks what the target says meanwhile, then commits
// it with CommitInFlight.
func TestSlowCommitProcessingThen409(t *testing.T) {
	s := startServer(t, Config{Dedup: true, Faults: Faults{SlowCommit: 1, SlowCommitDelay: time.Hour}})
	c := newClient(t, testTimeout)
	ctx := testContext(t)

	first := make(chan result, 1)
	go func() { first <- post(c, s.URL(), "k", `{"amount":3}`) }()
	if err := s.WaitInFlight(ctx, "k", 1); err != nil {
		t.Fatalf("WaitInFlight: %v", err)
	}

	st := get(c, statusURL(s, "k"))
	if a := decodeStatus(t, st.body); st.code != http.StatusOK || a.Status != "processing" || a.Key != "k" {
		t.Errorf("status while in flight: got %d %+v, want 200 processing", st.code, a)
	}
	if r := post(c, s.URL(), "k", `{"amount":3}`); r.code != http.StatusConflict {
		t.Errorf("same key in flight: got %d %q err %v, want 409", r.code, r.body, r.err)
	}
	if r := post(c, s.URL(), "k", `{"amount":4}`); r.code != http.StatusUnprocessableEntity {
		t.Errorf("other body in flight: got %d %q err %v, want 422", r.code, r.body, r.err)
	}
	if got := s.Creates("k"); got != 0 {
		t.Errorf("Creates while in flight: got %d, want 0", got)
	}

	if got := s.CommitInFlight(); got != 1 {
		t.Errorf("CommitInFlight: got %d, want 1", got)
	}
	r1 := <-first
	if r1.err != nil || r1.code != http.StatusCreated {
		t.Fatalf("first answer: got %d %q err %v, want 201", r1.code, r1.body, r1.err)
	}
	r3 := post(c, s.URL(), "k", `{"amount":3}`)
	if r3.code != http.StatusCreated || r3.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("after commit: got %d replayed %q, want 201 true", r3.code, r3.header.Get("Idempotent-Replayed"))
	}
	if p1, p3 := decodePayment(t, r1.body), decodePayment(t, r3.body); p1.ID != p3.ID {
		t.Errorf("replayed id: got %s, want %s", p3.ID, p1.ID)
	}
	st = get(c, statusURL(s, "k"))
	if a := decodeStatus(t, st.body); st.code != http.StatusOK || a.Status != "succeeded" {
		t.Errorf("status after commit: got %d %+v, want 200 succeeded", st.code, a)
	}
	got := s.Requests()
	if got.InProgress409 != 1 || got.Mismatch422 != 1 || got.StatusProcessing != 1 || got.Faults.SlowCommit != 1 {
		t.Errorf("counters: got 409=%d 422=%d processing=%d slow=%d, want 1 each",
			got.InProgress409, got.Mismatch422, got.StatusProcessing, got.Faults.SlowCommit)
	}
}

// TestSlowCommitAfterDelay checks that a slow create commits after its delay
// even though the client gave up long before.
func TestSlowCommitAfterDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	s := startServer(t, Config{Faults: Faults{SlowCommit: 1, SlowCommitDelay: delay}})
	ctx := testContext(t)

	start := time.Now()
	r := post(newClient(t, 20*time.Millisecond), s.URL(), "k", `{"amount":9}`)
	if r.err == nil {
		t.Fatalf("POST with a 20ms timeout: got %d, want a timeout error", r.code)
	}
	c := newClient(t, testTimeout)
	if err := s.waitFor(ctx, func() bool {
		ks := s.keys["k"]
		return ks != nil && len(ks.pending)+len(ks.payments) > 0
	}); err != nil {
		t.Fatal(err)
	}
	st := get(c, statusURL(s, "k"))
	a := decodeStatus(t, st.body)
	switch {
	case st.code == http.StatusOK && a.Status == "processing":
	case st.code == http.StatusOK && a.Status == "succeeded" && time.Since(start) >= delay:
	default:
		t.Errorf("status soon after the POST: got %d %+v after %v, want processing (or succeeded after %v)",
			st.code, a, time.Since(start), delay)
	}

	if err := s.WaitCreates(ctx, "k", 1); err != nil {
		t.Fatalf("WaitCreates: %v", err)
	}
	if err := s.WaitTotalCreates(ctx, 1); err != nil {
		t.Fatalf("WaitTotalCreates: %v", err)
	}
	if got := time.Since(start); got < delay {
		t.Errorf("commit after %v, want at least %v", got, delay)
	}
	st = get(c, statusURL(s, "k"))
	if a := decodeStatus(t, st.body); st.code != http.StatusOK || a.Status != "succeeded" || a.Key != "k" {
		t.Errorf("status after the delay: got %d %+v, want 200 succeeded", st.code, a)
	}
}

func TestStatusNotFound(t *testing.T) {
	s := startServer(t, Config{})
	st := get(newClient(t, testTimeout), statusURL(s, "nobody"))
	if st.code != http.StatusNotFound || string(st.body) != `{"error":"not found"}`+"\n" {
		t.Errorf("got %d %q, want 404 not found", st.code, st.body)
	}
	if got := s.Requests(); got.StatusQueries != 1 || got.StatusNotFound != 1 {
		t.Errorf("counters: got queries=%d notfound=%d, want 1 1", got.StatusQueries, got.StatusNotFound)
	}
}

func TestStatusEscapedKeys(t *testing.T) {
	s := startServer(t, Config{Dedup: true})
	c := newClient(t, testTimeout)
	keys := []string{"a/b", "a%2Fb", "a//b", "/lead", "..", ".", "x?y#z", "%", "+plus", `q"uote\`, "a;b=c,d"}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			if r := post(c, s.URL(), key, `{"amount":1}`); r.code != http.StatusCreated {
				t.Fatalf("POST: got %d %q err %v, want 201", r.code, r.body, r.err)
			}
			st := get(c, statusURL(s, key))
			a := decodeStatus(t, st.body)
			if st.code != http.StatusOK || a.Key != key || a.Status != "succeeded" {
				t.Errorf("status via %s: got %d %+v, want 200 with key %q", statusURL(s, key), st.code, a, key)
			}
		})
	}
	if got := s.TotalCreates(); got != len(keys) {
		t.Errorf("TotalCreates: got %d, want %d", got, len(keys))
	}
}

func TestSetFaultsAndSetDedup(t *testing.T) {
	s := startServer(t, Config{Dedup: true, Faults: Faults{Busy503: 1}})
	c := newClient(t, testTimeout)
	if r := post(c, s.URL(), "k", `{}`); r.code != http.StatusServiceUnavailable {
		t.Fatalf("with Busy503: got %d, want 503", r.code)
	}
	s.SetFaults(Faults{})
	r1 := post(c, s.URL(), "k", `{}`)
	if r1.code != http.StatusCreated {
		t.Fatalf("after SetFaults: got %d, want 201", r1.code)
	}
	s.SetDedup(false)
	if r := post(c, s.URL(), "k", `{}`); r.code != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("dedup off: got %d replayed %q, want 201 and no replay", r.code, r.header.Get("Idempotent-Replayed"))
	}
	if got := s.Creates("k"); got != 2 {
		t.Errorf("Creates after dedup off: got %d, want 2", got)
	}
	s.SetDedup(true)
	r3 := post(c, s.URL(), "k", `{}`)
	if r3.code != http.StatusCreated || r3.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("dedup on again: got %d replayed %q, want 201 true", r3.code, r3.header.Get("Idempotent-Replayed"))
	}
	if p1, p3 := decodePayment(t, r1.body), decodePayment(t, r3.body); p3.ID != p1.ID {
		t.Errorf("replayed id: got %s, want the first payment %s", p3.ID, p1.ID)
	}
	if got := s.Creates("k"); got != 2 {
		t.Errorf("Creates: got %d, want 2", got)
	}
	if got := len(s.BodiesByKey("k")); got != 4 {
		t.Errorf("BodiesByKey: got %d, want 4 (the 503 included)", got)
	}
}

func TestRecordsAreCopies(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, testTimeout)
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{"amount":42}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(idemkey.HeaderName, "k")
	req.Header.Set("X-Trace", "t1")
	if r := do(c, req); r.code != http.StatusCreated {
		t.Fatalf("POST: got %d, want 201", r.code)
	}

	bodies := s.BodiesByKey("k")
	bodies[0][0] = 'X'
	headers := s.HeadersByKey("k")
	headers[0].Set("X-Trace", "changed")
	ps := s.Payments("k")
	ps[0].Amount[0] = '9'
	counts := s.CreatesByKey()
	counts["k"] = 99

	if got := string(s.BodiesByKey("k")[0]); got != `{"amount":42}` {
		t.Errorf("body: got %q, want the original", got)
	}
	h := s.HeadersByKey("k")[0]
	if got := h.Get("X-Trace"); got != "t1" {
		t.Errorf("X-Trace: got %q, want t1", got)
	}
	if got := h.Get(idemkey.HeaderName); got != "k" {
		t.Errorf("recorded Idempotency-Key: got %q, want k", got)
	}
	if got := string(s.Payments("k")[0].Amount); got != "42" {
		t.Errorf("amount: got %s, want 42", got)
	}
	if got := s.Creates("k"); got != 1 {
		t.Errorf("Creates: got %d, want 1", got)
	}
}

func TestStatsEndpoint(t *testing.T) {
	s := startServer(t, Config{})
	c := newClient(t, testTimeout)
	for range 3 {
		post(c, s.URL(), "dup", `{}`)
	}
	post(c, s.URL(), "one", `{}`)
	r := get(c, s.URL()+"/stats")
	if r.err != nil || r.code != http.StatusOK {
		t.Fatalf("GET /stats: got %d err %v, want 200", r.code, r.err)
	}
	var got Stats
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.TotalCreates != 4 || got.Counters.Posts != 4 || got.Counters.Created != 4 || !slices.Equal(got.Duplicates, []string{"dup"}) {
		t.Errorf("stats: got %+v, want 4 creates, 4 posts, duplicates [dup]", got)
	}
	empty := get(c, startServer(t, Config{}).URL()+"/stats")
	if !strings.Contains(string(empty.body), `"duplicates":[]`) {
		t.Errorf("stats of an empty server: got %s, want an empty duplicates list", empty.body)
	}
}

func TestHandlerWithHTTPTest(t *testing.T) {
	s := New(Config{Dedup: true, Faults: Faults{LoseResponse: 1}})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = s.Close() }) // runs first: releases handlers before ts.Close waits for them
	if s.URL() != "" || s.StatusTemplate() != "" {
		t.Errorf("URL, StatusTemplate of New: got %q %q, want empty", s.URL(), s.StatusTemplate())
	}
	c := newClient(t, testTimeout)
	if r := post(c, ts.URL, "k", `{}`); r.err == nil {
		t.Fatalf("LoseResponse: got %d, want a transport error", r.code)
	}
	s.SetFaults(Faults{})
	r := post(c, ts.URL, "k", `{}`)
	if r.code != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: got %d replayed %q, want 201 true", r.code, r.header.Get("Idempotent-Replayed"))
	}
	if got := s.Creates("k"); got != 1 {
		t.Errorf("Creates: got %d, want 1", got)
	}
}

func TestStartBadAddr(t *testing.T) {
	s, err := Start(Config{Addr: "127.0.0.1:-1"})
	if err == nil {
		s.Close()
		t.Fatal("Start on a bad address: got nil error")
	}
	if !strings.HasPrefix(err.Error(), "faketarget: ") {
		t.Errorf("error: got %q, want the faketarget prefix", err)
	}
}
