package api

import (
	"net/netip"
	"testing"
)

// The addresses refused while an allowlist is set, in every form a dial
// can meet them, and the ones that stay allowed.
func TestForbiddenAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"169.254.169.254":          true,
		"169.254.1.1":              true,
		"::ffff:169.254.169.254":   true,
		"fe80::1":                  true,
		"fd00:ec2::254":            true,
		"100.100.100.200":          true, // Alibaba Cloud metadata
		"192.0.0.192":              true, // Oracle Cloud metadata
		"64:ff9b::a9fe:a9fe":       true, // 169.254.169.254 through NAT64
		"64:ff9b::a9fe:101":        true,
		"127.0.0.1":                false,
		"10.0.0.5":                 false,
		"93.184.216.34":            false,
		"64:ff9b::5db8:d822":       false, // 93.184.216.34 through NAT64
		"2001:db8::1":              false,
		"100.100.100.201":          false,
		"::ffff:93.184.216.34":     false,
		"fd00:ec2::253":            false,
		"ff02::1":                  true, // link-local multicast
		"224.0.0.1":                true,
		"192.0.0.193":              false,
		"::1":                      false,
		"0:0:0:0:0:ffff:a9fe:a9fe": true,
	} {
		if got := forbiddenAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("forbiddenAddr(%s) = %v, want %v", addr, got, want)
		}
	}
}

// dialControl refuses a forbidden address whatever name led to it, and
// lets the rest through.
func TestDialControl(t *testing.T) {
	for addr, refused := range map[string]bool{
		"169.254.169.254:80":      true,
		"[fe80::1%eth0]:443":      true, // with a zone too
		"[64:ff9b::a9fe:a9fe]:80": true,
		"100.100.100.200:80":      true,
		"127.0.0.1:8080":          false,
		"[::1]:443":               false,
	} {
		err := dialControl("tcp", addr, nil)
		if (err != nil) != refused {
			t.Errorf("dialControl(%s) = %v, want refused %v", addr, err, refused)
		}
	}
}

// A trailing dot names the same host: allowed or not like the name
// without it, in a pattern or in a URL.
func TestAllowTrailingDot(t *testing.T) {
	a, err := newHostAllow([]string{"api.example.com.", "*.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"api.example.com":   true,
		"api.example.com.":  true,
		"API.Example.COM.":  true,
		"a.example.org.":    true,
		"example.org.":      false,
		"evil-example.org.": false,
		"example.com.":      false,
	} {
		if got := a.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
}
