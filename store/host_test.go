package store

import "testing"

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
