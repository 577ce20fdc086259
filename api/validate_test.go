package api_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

// Request.Header: "Idempotency-Key is set by idemrun from the job's key."
func TestDocUserIdempotencyKeyHeader(t *testing.T) {
	c := revOpen(t)
	_, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:1/x", Header: []api.Header{{Name: "Idempotency-Key", Value: "mine"}}}, api.EnqueueOptions{Key: "theirs"})
	t.Logf("user Idempotency-Key header: err=%v", err)
}

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

// TestInvalidHeaderNameIsLinear: refusing an invalid header name must not
// cost time quadratic in its length (a 256 KiB name is well under the admin
// API's body limits and is checked before MaxHeaderBytes).
func TestInvalidHeaderNameIsLinear(t *testing.T) {
	name := strings.Repeat("a", 256<<10) + " x"
	done := make(chan error, 1)
	go func() {
		_, err := api.Validate(api.Request{URL: "http://127.0.0.1:9/pay", Header: []api.Header{{Name: name, Value: "v"}}}, api.EnqueueOptions{}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("invalid header name accepted")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Validate of one invalid 256 KiB header name still running after 2s ")
	}
}

// A refused URL is quoted back without its credentials: a password in the
// userinfo or a credential-like query parameter never appears in the error
// (which the CLI prints and the admin API returns), however the URL is
// malformed.
func TestRefusalsDoNotEchoSecrets(t *testing.T) {
	t.Parallel()
	const secret = "pa55word-planted"
	for _, raw := range []string{
		"http://user:" + secret + "@h/x",
		"http://user:" + secret + "@h:99999/",
		"http://user:" + secret + "@h/ x",
		"ftp://user:" + secret + "@h/",
		"http://h/?api_key=" + secret + "&x=\x01",
		"http://[::1/?token=" + secret,
		"gopher://h/?access_token=" + secret,
	} {
		err := api.ValidateURL("url", raw)
		if err == nil {
			t.Errorf("ValidateURL(%q): accepted, want refused", raw)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ValidateURL(%q): error %q echoes the credential", raw, err)
		}
	}
}

// A refused key's error says which rule refused it: a key starting with a
// double quote is made of accepted characters, and the message used to
// list only the character rules (found in a contract review).
func TestRefusedKeySaysWhy(t *testing.T) {
	for key, want := range map[string]string{
		`"q`:   "double quote",
		"a b":  "space at byte 1",
		"a\tb": "control character 0x09",
	} {
		_, err := api.Validate(api.Request{Method: "POST", URL: "http://127.0.0.1:9/p"}, api.EnqueueOptions{Key: key}, nil)
		if err == nil {
			t.Errorf("key %q accepted", key)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not starting with a double quote") {
			t.Errorf("key %q: %v; want the reason (%q) and the whole rule", key, err, want)
		}
	}
}

// TestStatusURLTemplateReuse: the client reuses the template it parsed
// last; alternating templates, a bad one among them, each job still gets
// its own template checked and stored.
func TestStatusURLTemplateReuse(t *testing.T) {
	ctx := context.Background()
	c := apitest.OpenClient(t, api.Options{})
	templates := []string{
		"http://127.0.0.1:9/a/{key}",
		"http://127.0.0.1:9/a/{key}",
		"http://127.0.0.1:9/b?op={key}",
		"http://127.0.0.1:9/{nope}",
		"http://127.0.0.1:9/a/{key}",
		"http://127.0.0.1:9/{nope}",
		"http://127.0.0.1:9/b?op={key}",
	}
	for i, tpl := range templates {
		res, err := c.Enqueue(ctx, api.Request{Method: "POST", URL: apitest.HostileURL}, api.EnqueueOptions{Key: fmt.Sprintf("tpl-%d", i), StatusURL: tpl})
		if strings.Contains(tpl, "nope") {
			if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "status-url") {
				t.Errorf("template %d %q: err = %v; want ErrInvalid naming status-url", i, tpl, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("template %d %q: %v", i, tpl, err)
		}
		if res.Job.StatusURL != tpl {
			t.Errorf("template %d: job stores status URL %q; want %q", i, res.Job.StatusURL, tpl)
		}
	}
}

// A client's own sensitive parameter names (Options.SensitiveParams) hide
// values in the errors that refuse a URL too, not only the default names:
// an invalid job URL and an invalid status URL template both carry the
// value, and neither error may show it.
func TestRefusedURLErrorsHideExtraSensitiveParams(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{SensitiveParams: []string{"x-sig"}})
	ctx := context.Background()
	const secret = "sEcReT7781"
	cases := []struct {
		name string
		req  api.Request
		opts api.EnqueueOptions
	}{
		// A space makes the job URL invalid.
		{"job url", api.Request{URL: "http://127.0.0.1:9/pay now?x-sig=" + secret}, api.EnqueueOptions{}},
		// No {key} or {id}: the status URL template is refused.
		{"status url", api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{StatusURL: "http://127.0.0.1:9/status?x-sig=" + secret}},
		// Not UTF-8: refused before the template is parsed.
		{"status url not utf-8", api.Request{URL: apitest.HostileURL}, api.EnqueueOptions{StatusURL: "http://127.0.0.1:9/s/{key}?x-sig=" + secret + "\xff"}},
	}
	for _, tc := range cases {
		_, err := c.Enqueue(ctx, tc.req, tc.opts)
		if err == nil {
			t.Errorf("%s: Enqueue accepted it, want a refusal", tc.name)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the x-sig value: %v", tc.name, err)
		}
		if !strings.Contains(err.Error(), "REDACTED") {
			t.Errorf("%s: the error does not show the value as hidden: %v", tc.name, err)
		}
	}
}

// A header line with a space where its colon belongs shows at most its
// first word, since the rest may be a credential, with or without a colon
// later in the line.
func TestParseHeaderLineHidesCredential(t *testing.T) {
	for _, line := range []string{
		"Authorization Bearer sk_live_51Hx9:abc",
		"Authorization Basic alice:s3cr3tpw",
		"X-Api-Key sk_live_51Hx9 # note: rotated",
		"Cookie sid=sessval42; at=10:00",
	} {
		_, err := api.ParseHeaderLine(line)
		if err == nil {
			t.Errorf("ParseHeaderLine(%q) accepted", line)
			continue
		}
		for _, s := range []string{"sk_live_51Hx9", "s3cr3tpw", "sessval42"} {
			if strings.Contains(line, s) && strings.Contains(err.Error(), s) {
				t.Errorf("ParseHeaderLine(%q) error echoes the credential %q: %v", line, s, err)
			}
		}
	}
}

// A refused duration's examples lie within the field's own bound: "at
// most 10m (e.g. 30s, 5m, 2h)" invited the next refusal.
func TestRefusedDurationExamplesWithinBound(t *testing.T) {
	req := api.Request{Method: "POST", URL: "http://127.0.0.1:9/p"}
	for _, c := range []struct {
		name string
		o    api.EnqueueOptions
		want string
	}{
		{"attempt-timeout", api.EnqueueOptions{AttemptTimeout: time.Hour}, "invalid attempt-timeout \"1h0m0s\": accepted: a duration greater than 0 and at most 10m, such as 500ms, 30s, 5m"},
		{"deadline", api.EnqueueOptions{Deadline: 800 * time.Hour}, "at most 720h, such as 5m, 2h, 48h"},
		{"key-ttl", api.EnqueueOptions{KeyTTL: -time.Second}, "a duration 0 (unset) or positive and at most 8760h, such as 5m, 2h, 48h"},
	} {
		_, err := api.Validate(req, c.o, nil)
		if err == nil || !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an invalid-input error containing %q", c.name, err, c.want)
		}
	}
}
