package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
)

// Every field of an enqueue spec reaches its place in the job.
func TestDecodeEnqueueFields(t *testing.T) {
	s, err := api.DecodeEnqueue([]byte(`{"url":"http://h/x","method":"PUT","headers":{"A":"1"},"header_lines":["B: 2"],"data":"d","key":"k",` +
		`"key_format":"structured","status_url":"http://h/s/{key}","key_ttl":"24h","max_attempts":3,"deadline":"1h",` +
		`"attempt_timeout":"5s","replay_safe":true,"no_effect_statuses":[503,502]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %v %v %s %s %s %s %s %d %s %s %v %v", s.URL, s.Method, s.Headers, s.HeaderLines, *s.Data, s.Key,
		s.KeyFormat, s.StatusURL, time.Duration(s.KeyTTL), s.MaxAttempts, time.Duration(s.Deadline), time.Duration(s.AttemptTimeout), s.ReplaySafe, s.NoEffectStatuses)
	want := "http://h/x PUT [{A 1}] [B: 2] d k structured http://h/s/{key} 24h0m0s 3 1h0m0s 5s true [503 502]"
	if got != want {
		t.Errorf("decoded spec:\n got %s\nwant %s", got, want)
	}
	req, o, err := s.Parts(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got = fmt.Sprintf("%s %s %v %s %s %s %s %s %d %s %s %v %v", req.URL, req.Method, req.Header, req.Body, o.Key,
		o.KeyFormat, o.StatusURL, o.KeyTTL, o.MaxAttempts, o.Deadline, o.AttemptTimeout, o.ReplaySafe, o.NoEffectStatuses)
	want = "http://h/x PUT [{A 1} {B 2}] d k structured http://h/s/{key} 24h0m0s 3 1h0m0s 5s true [503 502]"
	if got != want {
		t.Errorf("its request and options:\n got %s\nwant %s", got, want)
	}
}

// The admin API's earlier body (headers as an array, body in base64,
// run_at as a time) is the one schema too, and headers in either form
// keep what they say: the array its order and repeats, the object its
// names in order.
func TestDecodeEnqueueForms(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s, err := api.DecodeEnqueue([]byte(`{"url":"http://h/x","headers":[{"name":"X-B","value":" 1"},{"name":"X-A","value":"2"},{"name":"X-B","value":"3"}],` +
		`"body":"AP8=","run_at":"` + at.Format(time.RFC3339Nano) + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	req, o, err := s.Parts(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(req.Header); got != "[{X-B  1} {X-A 2} {X-B 3}]" || string(req.Body) != "\x00\xff" || !o.RunAt.Equal(at) {
		t.Errorf("earlier admin body: headers %s body %q run_at %s; want the array's order and repeats, the bytes, the time", got, req.Body, o.RunAt)
	}
	s, err = api.DecodeEnqueue([]byte(`{"url":"http://h/x","headers":{"X-B":"1","X-A":"2"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Headers); got != "[{X-A 2} {X-B 1}]" {
		t.Errorf("headers as an object: %s, want sorted by name", got)
	}
	for _, bad := range []string{
		`{"url":"http://h/x","data":"a","body":"YQ=="}`,
		`{"url":"http://h/x","headers":"X-A: 1"}`,
		`{"url":"http://h/x","headers":[{"name":"X-A","value":"1","extra":true}]}`,
		`{"url":"http://h/x","run_at":""}`,
	} {
		if _, err := api.DecodeEnqueue([]byte(bad)); err == nil || !strings.Contains(err.Error(), "accepted") {
			t.Errorf("DecodeEnqueue(%s): %v, want a refusal", bad, err)
		}
	}
	// What a client sends decodes to what it was given.
	in := api.Request{Method: "PATCH", URL: "http://h/y", Header: []api.Header{{Name: "X-A", Value: "1"}, {Name: "X-A", Value: "2"}}, Body: []byte{0, 1, 2}}
	opts := api.EnqueueOptions{Key: "k", RunAt: at, Deadline: time.Hour}
	b, err := jsonOf(api.SpecOf(in, opts))
	if err != nil {
		t.Fatal(err)
	}
	s, err = api.DecodeEnqueue(b)
	if err != nil {
		t.Fatalf("DecodeEnqueue(SpecOf(…)) = %v: %s", err, b)
	}
	req, o, err = s.Parts(time.Now())
	if err != nil || fmt.Sprint(req) != fmt.Sprint(in) || o.Key != "k" || !o.RunAt.Equal(at) || o.Deadline != time.Hour {
		t.Errorf("a client's spec read back: %v %+v %+v, want %+v %+v", err, req, o, in, opts)
	}
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }

// FuzzDecodeEnqueue: the enqueue decoder (of --from lines and admin API
// bodies) never panics, refuses with an *InvalidError, and what it accepts
// survives an encode and decode unchanged (a client through a runner's
// socket sends exactly what the server reads).
func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range apitest.EnqueueSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := api.DecodeEnqueue(b)
		if err != nil {
			apitest.CheckInvalid(t, "DecodeEnqueue", err)
			return
		}
		enc, err := json.Marshal(w)
		if err != nil {
			t.Fatalf("re-encoding an accepted body %s: %v", apitest.Clip(b), err)
		}
		w2, err := api.DecodeEnqueue(enc)
		if err != nil {
			t.Fatalf("decoding the re-encoded body %s: %v", apitest.Clip(enc), err)
		}
		enc2, err := json.Marshal(w2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the body:\n got %s\nwant %s", apitest.Clip(enc2), apitest.Clip(enc))
		}
		// Whatever was decoded, validation refuses or accepts it without
		// panicking.
		req, o, err := w.Parts(time.Now())
		if err != nil {
			apitest.CheckInvalid(t, "Parts of a decoded body", err)
			return
		}
		if _, err := api.Validate(req, o, nil); err != nil {
			apitest.CheckInvalid(t, "Validate of a decoded body", err)
		}
	})
}

// An admin enqueue body naming status_url twice, once with U+017F (ſ) for
// the s: refused as a field given twice (encoding/json would let the second
// spelling win).
func TestAdminBodyLongSDuplicateRefused(t *testing.T) {
	body := `{"method":"POST","url":"http://127.0.0.1:1/pay","status_url":"http://good/{key}","ſtatus_url":"http://evil/{key}"}`
	w, err := api.DecodeEnqueue([]byte(body))
	if err == nil {
		t.Errorf("DecodeEnqueue accepted a duplicate field; status_url=%q", w.StatusURL)
	}
}
