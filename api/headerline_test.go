package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
)

// A refused header line never shows what may be a credential: a line
// written Name=value (or with a tab, or a bare token) shows at most its
// name, and says a colon is what is accepted. Before, "X-Api-Key=sk_…" was
// echoed whole (found by a probe).
func TestParseHeaderLineHidesValue(t *testing.T) {
	for _, c := range []struct {
		line, secret, name string // name: shown; "" for nothing shown
	}{
		{"X-Api-Key=sk_live_123", "sk_live_123", "X-Api-Key"},
		{"Cookie=session=abc123def", "abc123def", "Cookie"},
		{"Authorization=Bearer sk_live_9Zq", "sk_live_9Zq", "Authorization"},
		{"X-Api-Key\tsk_live_123", "sk_live_123", "X-Api-Key"},
		{"X-Api-Key;sk_live_123", "sk_live_123", "X-Api-Key"},
		{"sk_live_51Hx9AbCdEf", "sk_live_51Hx9AbCdEf", ""},
		{"ghp_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c6912E7710c838347Ae178B4a", ""},
		{"AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", ""},
		{"xoxb-1234-5678-abcdef", "1234-5678-abcdef", ""},
		{"sk_live_9Zq=x: y", "sk_live_9Zq", ""},
	} {
		_, err := api.ParseHeaderLine(c.line)
		if err == nil {
			t.Errorf("ParseHeaderLine(%q) accepted", c.line)
			continue
		}
		apitest.CheckInvalid(t, "ParseHeaderLine", err)
		msg := err.Error()
		if strings.Contains(msg, c.secret) {
			t.Errorf("ParseHeaderLine(%q) shows %q: %s", c.line, c.secret, msg)
		}
		if c.name != "" && !strings.Contains(msg, `"`+c.name) {
			t.Errorf("ParseHeaderLine(%q) does not name %s: %s", c.line, c.name, msg)
		}
		if !strings.Contains(msg, "Name: value") {
			t.Errorf("ParseHeaderLine(%q) does not say what is accepted: %s", c.line, msg)
		}
	}
	// A spec's header_lines and its headers' names are refused the same way.
	for _, spec := range []string{
		`{"url":"http://127.0.0.1:9/p","header_lines":["X-Api-Key=sk_live_123"]}`,
		`{"url":"http://127.0.0.1:9/p","headers":{"X-Api-Key=sk_live_123":"v"}}`,
		`{"url":"http://127.0.0.1:9/p","headers":{"sk_live_123 x":"v"}}`,
	} {
		s, err := api.DecodeEnqueue([]byte(spec))
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		req, o, err := s.Parts(time.Now())
		if err == nil {
			_, err = api.Validate(req, o, nil)
		}
		if err == nil {
			t.Errorf("%s accepted", spec)
		} else if strings.Contains(err.Error(), "sk_live_123") {
			t.Errorf("%s: the refusal shows the credential: %v", spec, err)
		}
	}
}

// Lines that are header names followed by something other than a colon
// keep showing the name, so the mistake is easy to see.
func TestParseHeaderLineShowsName(t *testing.T) {
	for line, name := range map[string]string{
		"X-NoColon":               "X-NoColon",
		"Content-Type=text/plain": "Content-Type",
		"X-B3-TraceId 5":          "X-B3-TraceId",
		"X-Amz-Content-Sha256=x":  "X-Amz-Content-Sha256",
		"Bad Name: x":             "Bad",
	} {
		_, err := api.ParseHeaderLine(line)
		if err == nil || !strings.Contains(err.Error(), `"`+name) {
			t.Errorf("ParseHeaderLine(%q) = %v, want the name %s shown", line, err, name)
		}
	}
}
