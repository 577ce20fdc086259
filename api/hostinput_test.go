package api_test

import (
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
)

func TestParseHost(t *testing.T) {
	for in, want := range map[string]string{
		"*":                  "*",
		"api.example.com":    "api.example.com",
		"API.Example.com":    "api.example.com",
		"127.0.0.1:8080":     "127.0.0.1:8080",
		"[::1]:9000":         "[::1]:9000",
		"[::1]":              "[::1]",
		"api.example.com:80": "api.example.com:80", // https://api.example.com:80
		"x.example.com:443":  "x.example.com:443",  // http://x.example.com:443
	} {
		got, err := api.ParseHost(in)
		if err != nil || got != want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", " ", "api.example.com ", "a b", "https://api.example.com", "api.example.com/v1", "user@api.example.com",
		"api.example.com?x", "*.example.com", "api.example.com:", "api.example.com:0", "api.example.com:65536",
		"api.example.com:08080", "api.example.com:http", "::1", "[::1", "\x00", "api\texample.com",
	} {
		_, err := api.ParseHost(in)
		apitest.CheckInvalid(t, "ParseHost("+in+")", err)
		if ie := err.(*api.InvalidError); ie.Field != "host" || !strings.Contains(ie.Accepted, "* for the default policy") {
			t.Errorf("ParseHost(%q): %+v; want the field host and what it accepts", in, ie)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"40/s": 40, "0.5/s": 0.5, "120/m": 2, "3600/h": 1, "1/h": 1.0 / 3600, "1000000/s": 1e6, "007/s": 7,
	} {
		got, err := api.ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "40", "fast", "0/s", "-5/s", "0.0/s", "40/d", "40/sec", "40 /s", "1e3/s", "Inf/s", "NaN/s", "0x10/s",
		"+5/s", "./s", "1..2/s", "1000001/s", "40/s/s",
	} {
		_, err := api.ParseRate(in)
		apitest.CheckInvalid(t, "ParseRate("+in+")", err)
		if ie := err.(*api.InvalidError); ie.Field != "rate" {
			t.Errorf("ParseRate(%q) names field %q; want rate", in, ie.Field)
		}
	}
}

// FormatRate writes what ParseRate reads, in the unit that shows a whole
// number.
func TestFormatRate(t *testing.T) {
	for _, in := range []string{"40/s", "100/m", "30/m", "7/h", "1/h", "1000000/s"} {
		r, err := api.ParseRate(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := api.FormatRate(r); got != in {
			t.Errorf("FormatRate(ParseRate(%q)) = %q", in, got)
		}
	}
	if got := api.FormatRate(2.5); got != "150/m" {
		t.Errorf("FormatRate(2.5) = %q; want 150/m", got)
	}
	if got := api.FormatRate(1.0 / 7200); got != "0.000138889/s" {
		t.Errorf("FormatRate(1/7200) = %q", got)
	}
}
