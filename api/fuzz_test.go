package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
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
			apitest.CheckInvalid(t, "ValidateURL", err)
			return
		}
		if len(raw) > api.MaxURLLen {
			t.Fatalf("accepted a URL of %d bytes, want at most %d", len(raw), api.MaxURLLen)
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			t.Fatalf("accepted %s, which url.Parse refuses: %v", apitest.Clip(raw), perr)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("accepted %s with scheme %q, want http or https", apitest.Clip(raw), u.Scheme)
		}
		if u.Hostname() == "" {
			t.Fatalf("accepted %s without a host", apitest.Clip(raw))
		}
		if u.User != nil {
			t.Fatalf("accepted %s with userinfo", apitest.Clip(raw))
		}
		if strings.ContainsAny(raw, " \r\n\t\x00") {
			t.Fatalf("accepted %s with spaces or control characters", apitest.Clip(raw))
		}
		// The runner builds every attempt with http.NewRequest: an accepted
		// URL must be one it can build.
		if _, err := http.NewRequest(http.MethodPost, raw, nil); err != nil {
			t.Fatalf("accepted %s, which net/http cannot send: %v", apitest.Clip(raw), err)
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
			apitest.CheckInvalid(t, "ParseHeaderLine", err)
			return
		}
		if !isToken(h.Name) {
			t.Fatalf("accepted %s with name %q, want an RFC 9110 token", apitest.Clip(line), h.Name)
		}
		for i := 0; i < len(h.Value); i++ {
			if c := h.Value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				t.Fatalf("accepted %s with control byte %#x in the value", apitest.Clip(line), c)
			}
		}
		// Enqueue's validation agrees (size limits are per request, not
		// per line, so only lines within them are compared).
		if len(h.Name)+len(h.Value) <= api.MaxHeaderBytes {
			if _, err := api.Validate(api.Request{URL: "http://127.0.0.1/x", Header: []api.Header{h}}, api.EnqueueOptions{}, nil); err != nil {
				t.Fatalf("ParseHeaderLine accepted %s but Enqueue's validation refuses it: %v", apitest.Clip(line), err)
			}
		}
		// On the wire and back, built the way the runner builds attempts:
		// the value the target reads is the value that was stored.
		j := &store.Job{Key: "k", Request: store.Request{Method: http.MethodPost, URL: "http://127.0.0.1/x", Header: []store.HeaderField{h}, Body: []byte("b")}}
		req, err := runner.BuildRequest(context.Background(), j)
		if err != nil {
			t.Fatalf("building a request with header %s: %v", apitest.Clip(line), err)
		}
		var wire bytes.Buffer
		if err := req.Write(&wire); err != nil {
			t.Fatalf("accepted header %s cannot be sent: %v", apitest.Clip(line), err)
		}
		back, err := http.ReadRequest(bufio.NewReader(&wire))
		if err != nil {
			t.Fatalf("a server cannot read a request with accepted header %s: %v", apitest.Clip(line), err)
		}
		if strings.EqualFold(h.Name, "Host") {
			if back.Host != h.Value {
				t.Fatalf("Host header %s over the wire: got %q, want %q", apitest.Clip(line), back.Host, h.Value)
			}
			return
		}
		if got := back.Header.Values(h.Name); len(got) != 1 || got[0] != h.Value {
			t.Fatalf("header %s over the wire: got %s, want [%s]", apitest.Clip(line), apitest.Clip(strings.Join(got, "|")), apitest.Clip(h.Value))
		}
	})
}

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
