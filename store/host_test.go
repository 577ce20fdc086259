package store

import (
	"testing"
	"time"
)

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://API.example.com/v1/x":      "api.example.com",
		"https://api.example.com:443/x":     "api.example.com",
		"http://api.example.com:80/x":       "api.example.com",
		"http://api.example.com:443/x":      "api.example.com:443",
		"http://127.0.0.1:8080/x?a=1":       "127.0.0.1:8080",
		"http://[::1]:9000/x":               "[::1]:9000",
		"https://user:pw@pay.example.com/x": "pay.example.com",
		"not a url":                         "",
		"/relative":                         "",
	} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClaimHost(t *testing.T) {
	j := &Job{State: StatePending, Request: Request{URL: "https://api.example.com/payments"}, StatusURL: "https://status.example.com/p/{key}"}
	if got := ClaimHost(j); got != "api.example.com" {
		t.Errorf("pending: %q", got)
	}
	j.State = StateUnknown
	if got := ClaimHost(j); got != "status.example.com" {
		t.Errorf("unknown with a status URL: %q", got)
	}
	j.StatusURL = ""
	if got := ClaimHost(j); got != "api.example.com" {
		t.Errorf("unknown without a status URL: %q", got)
	}
}

// A host's own policy sets what it gives; the default's fills in the rest.
func TestHostPolicyOver(t *testing.T) {
	def := HostPolicy{Host: DefaultHost, Rate: 5, Burst: 2, Concurrency: 3, Settle: time.Minute, Paused: true, Note: "all"}
	for _, tc := range []struct {
		name      string
		own, want HostPolicy
	}{
		{"empty (a pause resumed)", HostPolicy{Host: "h"},
			HostPolicy{Host: "h", Rate: 5, Burst: 2, Concurrency: 3, Settle: time.Minute}},
		{"a settle window alone", HostPolicy{Host: "h", Settle: 6 * time.Second},
			HostPolicy{Host: "h", Rate: 5, Burst: 2, Concurrency: 3, Settle: 6 * time.Second}},
		{"a rate keeps its own burst", HostPolicy{Host: "h", Rate: 50},
			HostPolicy{Host: "h", Rate: 50, Concurrency: 3, Settle: time.Minute}},
		{"everything its own", HostPolicy{Host: "h", Rate: 50, Burst: 9, Concurrency: 7, Settle: time.Second, Paused: true, Note: "n"},
			HostPolicy{Host: "h", Rate: 50, Burst: 9, Concurrency: 7, Settle: time.Second, Paused: true, Note: "n"}},
	} {
		if got := tc.own.Over(def); got != tc.want {
			t.Errorf("%s: %+v.Over(%+v) = %+v, want %+v", tc.name, tc.own, def, got, tc.want)
		}
	}
	if got := (HostPolicy{Host: "h"}).Over(HostPolicy{}); got != (HostPolicy{Host: "h"}) {
		t.Errorf("no default: got %+v, want the host's own", got)
	}
}

// Without a policy of its own a host follows the default's whole, its
// pause included.
func TestFollows(t *testing.T) {
	def := HostPolicy{Host: DefaultHost, Rate: 5, Paused: true, Note: "all"}
	if got := Follows(HostPolicy{}, false, def); got != def {
		t.Errorf("no policy of its own: %+v, want the default's %+v", got, def)
	}
	own := HostPolicy{Host: "h", Concurrency: 2}
	if got, want := Follows(own, true, def), own.Over(def); got != want {
		t.Errorf("a policy of its own: %+v, want %+v", got, want)
	}
}
