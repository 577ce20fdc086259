package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/store"
)

// The fuzz targets below run their seeds (the f.Add calls and the files
// under testdata/fuzz/FuzzXxx) in plain `go test`; `make fuzz` or
// `go test -run=^$ -fuzz=FuzzXxx -fuzztime=60s ./api/` explores further.

// isToken reports whether s is an RFC 9110 token, written independently of
// the package's own check.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range []byte(s) {
		if r >= 0x80 || r <= 0x20 || r == 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(r)) {
			return false
		}
	}
	return true
}

// clip quotes s for a failure message, shortened to 200 bytes.
func clip[T string | []byte](s T) string {
	if len(s) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", s[:200], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// checkInvalid fails unless err is an *InvalidError wrapping ErrInvalid.
func checkInvalid(t *testing.T, where string, err error) {
	t.Helper()
	var ie *api.InvalidError
	if !errors.Is(err, api.ErrInvalid) || !errors.As(err, &ie) {
		t.Fatalf("%s: got error %v (%T), want an *api.InvalidError wrapping api.ErrInvalid", where, err, err)
	}
	if ie.Field == "" || ie.Accepted == "" {
		t.Fatalf("%s: got InvalidError %+v, want the field and what is accepted named", where, ie)
	}
}

// FuzzValidateURL: ValidateURL never panics, refuses with an *InvalidError,
// and every URL it accepts parses, is http or https with a host and no
// user:password, fits 8 KiB, and can be sent by net/http.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:8080/payments?x=1",
		"https://api.example.com/v1/charges",
		"HTTPS://API.EXAMPLE.COM:443/",
		"http://[::1]:9/x",
		"http://[fe80::1%25eth0]/x",
		"http://user:pass@h/",
		"http://:80/",
		"http://h:/",
		"http://h:65536/",
		"http://h:0/",
		"ftp://h/",
		"javascript:alert(1)",
		"http:opaque",
		"//h/x",
		"http://h/x\r\nHost: evil",
		"http://h/\x00",
		"http://[::1/",
		"http://a b/",
		"http://h%41/",
		"http://evil.org\\.example.com/",
		"http://h/" + strings.Repeat("a", 8<<10),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := api.ValidateURL("url", raw)
		if err != nil {
			checkInvalid(t, "ValidateURL", err)
			return
		}
		if len(raw) > api.MaxURLLen {
			t.Fatalf("accepted a URL of %d bytes, want at most %d", len(raw), api.MaxURLLen)
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			t.Fatalf("accepted %s, which url.Parse refuses: %v", clip(raw), perr)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("accepted %s with scheme %q, want http or https", clip(raw), u.Scheme)
		}
		if u.Hostname() == "" {
			t.Fatalf("accepted %s without a host", clip(raw))
		}
		if u.User != nil {
			t.Fatalf("accepted %s with userinfo", clip(raw))
		}
		if strings.ContainsAny(raw, " \r\n\t\x00") {
			t.Fatalf("accepted %s with spaces or control characters", clip(raw))
		}
		// The runner builds every attempt with http.NewRequest: an accepted
		// URL must be one it can build.
		if _, err := http.NewRequest(http.MethodPost, raw, nil); err != nil {
			t.Fatalf("accepted %s, which net/http cannot send: %v", clip(raw), err)
		}
	})
}

// FuzzParseHeaderLine: ParseHeaderLine never panics; an accepted header has
// a token name, a value without CR, LF or NUL, is accepted by Enqueue's
// validation too, and survives the trip over the wire unchanged.
func FuzzParseHeaderLine(f *testing.F) {
	for _, s := range []string{
		"Content-Type: application/json",
		"Authorization: Bearer abc",
		"X-Empty:",
		"X-A: a\r\nX-Injected: b",
		"X-A: a\x00b",
		"X-A: a\nb",
		"Nämé: x",
		"Bad Name: x",
		": no name",
		"NoColon",
		"Idempotency-Key: mine",
		"transfer-encoding: chunked",
		"Host: evil.example",
		"X-Tab:\tvalue\twith tabs\t",
		"X-Obs: caf\xc3\xa9 \xff",
		"X-A\u00a0: nbsp",
		"X-Del: a\x7fb",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		h, err := api.ParseHeaderLine(line)
		if err != nil {
			checkInvalid(t, "ParseHeaderLine", err)
			return
		}
		if !isToken(h.Name) {
			t.Fatalf("accepted %s with name %q, want an RFC 9110 token", clip(line), h.Name)
		}
		for i := 0; i < len(h.Value); i++ {
			if c := h.Value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				t.Fatalf("accepted %s with control byte %#x in the value", clip(line), c)
			}
		}
		// Enqueue's validation agrees (size limits are per request, not
		// per line, so only lines within them are compared).
		if len(h.Name)+len(h.Value) <= api.MaxHeaderBytes {
			if _, err := api.Validate(api.Request{URL: "http://127.0.0.1/x", Header: []api.Header{h}}, api.EnqueueOptions{}, nil); err != nil {
				t.Fatalf("ParseHeaderLine accepted %s but Enqueue's validation refuses it: %v", clip(line), err)
			}
		}
		// On the wire and back, built the way the runner builds attempts:
		// the value the target reads is the value that was stored.
		j := &store.Job{Key: "k", Request: store.Request{Method: http.MethodPost, URL: "http://127.0.0.1/x", Header: []store.HeaderField{h}, Body: []byte("b")}}
		req, err := runner.BuildRequest(context.Background(), j)
		if err != nil {
			t.Fatalf("building a request with header %s: %v", clip(line), err)
		}
		var wire bytes.Buffer
		if err := req.Write(&wire); err != nil {
			t.Fatalf("accepted header %s cannot be sent: %v", clip(line), err)
		}
		back, err := http.ReadRequest(bufio.NewReader(&wire))
		if err != nil {
			t.Fatalf("a server cannot read a request with accepted header %s: %v", clip(line), err)
		}
		if strings.EqualFold(h.Name, "Host") {
			if back.Host != h.Value {
				t.Fatalf("Host header %s over the wire: got %q, want %q", clip(line), back.Host, h.Value)
			}
			return
		}
		if got := back.Header.Values(h.Name); len(got) != 1 || got[0] != h.Value {
			t.Fatalf("header %s over the wire: got %s, want [%s]", clip(line), clip(strings.Join(got, "|")), clip(h.Value))
		}
	})
}

// FuzzDecodeEnqueue: the admin API's enqueue body decoder never panics,
// refuses with an *InvalidError, and what it accepts survives an encode and
// decode unchanged (the CLI's Remote sends exactly what the server reads).
func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range adminSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := api.DecodeEnqueue(b)
		if err != nil {
			checkInvalid(t, "DecodeEnqueue", err)
			return
		}
		enc, err := json.Marshal(w)
		if err != nil {
			t.Fatalf("re-encoding an accepted body %s: %v", clip(b), err)
		}
		w2, err := api.DecodeEnqueue(enc)
		if err != nil {
			t.Fatalf("decoding the re-encoded body %s: %v", clip(enc), err)
		}
		enc2, err := json.Marshal(w2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the body:\n got %s\nwant %s", clip(enc2), clip(enc))
		}
		// Whatever was decoded, validation refuses or accepts it without
		// panicking.
		req := api.Request{Method: w.Method, URL: w.URL, Body: w.Body}
		for _, h := range w.Headers {
			req.Header = append(req.Header, api.Header{Name: h.Name, Value: h.Value})
		}
		o := api.EnqueueOptions{Key: w.Key, StatusURL: w.StatusURL, MaxAttempts: w.MaxAttempts, NoEffectStatuses: w.NoEffectStatuses}
		if _, err := api.Validate(req, o, nil); err != nil {
			checkInvalid(t, "Validate of a decoded body", err)
		}
	})
}

// adminSeeds are enqueue bodies for FuzzDecodeEnqueue and FuzzAdminEnqueue;
// more hostile ones are in testdata/fuzz.
var adminSeeds = []string{
	`{"url":"http://127.0.0.1:9/pay","method":"POST","headers":[{"name":"Content-Type","value":"application/json"}],"body":"eyJhIjoxfQ==","key":"seed-1"}`,
	`{"url":"http://127.0.0.1:9/pay","key":"seed-2","status_url":"http://127.0.0.1:9/s/{key}","key_ttl":"1h","max_attempts":3,"deadline":"10m","attempt_timeout":"5s","replay_safe":true,"no_effect_statuses":[503],"key_format":"structured"}`,
	`{"url":"http://127.0.0.1:9/pay","colour":"red"}`,
	`{"url":5}`,
	`{"url":"http://127.0.0.1:9/pay","max_attempts":"5"}`,
	`{"url":"http://127.0.0.1:9/pay","body":"not base64!"}`,
	`{"url":"http://127.0.0.1:9/pay","headers":{"a":"b"}}`,
	`{"url":"http://127.0.0.1:9/pay","deadline":5}`,
	`{"url":"http://127.0.0.1:9/pay","key_ttl":"9999999999h"}`,
	`{"url":"http://127.0.0.1:9/pay","headers":[{"name":"X-A","value":"a\u0000b"}]}`,
	`{"url":"http://127.0.0.1:9/pay","key":"seed-3"} {"url":"http://127.0.0.1:9/other"}`,
	`null`,
	`[]`,
	``,
	`{`,
}

// adminPost posts b to /v1/jobs of the admin API at base.
func adminPost(t *testing.T, client *http.Client, base string, b []byte) (int, api.WireError, []byte) {
	t.Helper()
	resp, err := client.Post(base+"/v1/jobs", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST /v1/jobs: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	var we api.WireError
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(body, &we); err != nil {
			t.Fatalf("error answer %d is not a JSON error body (%v): %s", resp.StatusCode, err, clip(body))
		}
	}
	return resp.StatusCode, we, body
}

func totalJobs(t *testing.T, c *api.Client) int64 {
	t.Helper()
	st, err := c.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	var n int64
	for _, v := range st {
		n += v
	}
	return n
}

// FuzzAdminEnqueue posts arbitrary bytes to the admin API's /v1/jobs over a
// real database: bad input is always 400 invalid_input (never a 5xx), a
// body that is not valid JSON never creates a job, and a job is either
// wholly stored (201, readable, valid, the file consistent) or not at all.
func FuzzAdminEnqueue(f *testing.F) {
	for _, s := range adminSeeds {
		f.Add([]byte(s))
	}
	c, err := api.Open(filepath.Join(f.TempDir(), "fuzz.db"), &api.Options{Warn: io.Discard})
	if err != nil {
		f.Fatalf("api.Open: %v", err)
	}
	srv := httptest.NewServer(api.AdminHandler(c, api.AdminOptions{}))
	f.Cleanup(func() {
		srv.Close()
		c.Close()
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		before := totalJobs(t, c)
		status, we, body := adminPost(t, srv.Client(), srv.URL, b)
		after := totalJobs(t, c)
		_, decErr := api.DecodeEnqueue(b)
		switch status {
		case http.StatusCreated:
			if !json.Valid(b) {
				t.Fatalf("body %s is not valid JSON, yet a job was created: %s", clip(b), clip(body))
			}
			if decErr != nil {
				t.Fatalf("DecodeEnqueue refuses %s (%v), yet the handler created a job", clip(b), decErr)
			}
			var res struct {
				Job *api.Job `json:"job"`
			}
			if err := json.Unmarshal(body, &res); err != nil || res.Job == nil {
				t.Fatalf("201 answer without a job (%v): %s", err, clip(body))
			}
			if after != before+1 {
				t.Fatalf("201 for %s: jobs went from %d to %d, want one more", clip(b), before, after)
			}
			j, err := c.Store().Get(res.Job.ID)
			if err != nil {
				t.Fatalf("created job %s is not readable: %v", res.Job.ID, err)
			}
			o := api.EnqueueOptions{Key: j.Key, StatusURL: j.StatusURL, KeyTTL: j.KeyTTL, MaxAttempts: j.MaxAttempts,
				Deadline: j.DeadlineAfter, AttemptTimeout: j.AttemptTimeout, NoEffectStatuses: j.NoEffectStatuses}
			if j.KeyFormat != "" {
				if o.KeyFormat, err = idemkey.ParseFormat(j.KeyFormat); err != nil {
					t.Fatalf("stored key format %q: %v", j.KeyFormat, err)
				}
			}
			req := api.Request{Method: j.Request.Method, URL: j.Request.URL, Header: j.Request.Header, Body: j.Request.Body}
			if _, err := api.Validate(req, o, nil); err != nil {
				t.Fatalf("stored job %s does not pass validation again: %v", j.ID, err)
			}
			rep, err := c.Check(context.Background())
			if err != nil || !rep.OK() {
				t.Fatalf("file inconsistent after creating job %s: %v %v", j.ID, err, rep.Problems)
			}
		case http.StatusOK, http.StatusConflict:
			if status == http.StatusConflict && we.Error.Code != api.CodeKeyConflict {
				t.Fatalf("409 for %s with code %q, want %q", clip(b), we.Error.Code, api.CodeKeyConflict)
			}
			if after != before {
				t.Fatalf("answer %d for %s changed the job count from %d to %d", status, clip(b), before, after)
			}
		case http.StatusBadRequest:
			if we.Error.Code != api.CodeInvalid {
				t.Fatalf("400 for %s with code %q, want %q", clip(b), we.Error.Code, api.CodeInvalid)
			}
			if we.Error.Message == "" {
				t.Fatalf("400 for %s without a message", clip(b))
			}
			if after != before {
				t.Fatalf("refused body %s changed the job count from %d to %d", clip(b), before, after)
			}
		default:
			t.Fatalf("POST /v1/jobs %s: got %d %s, want 201, 200, 400 or 409", clip(b), status, clip(body))
		}
		if decErr != nil && status != http.StatusBadRequest {
			t.Fatalf("DecodeEnqueue refuses %s (%v) but the handler answered %d", clip(b), decErr, status)
		}
	})
}
