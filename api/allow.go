package api

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"github.com/idemrun/idemrun/runner"
)

// hostAllow is an optional target allowlist. A nil *hostAllow allows all.
type hostAllow struct {
	exact  map[string]bool
	suffix []string // ".example.com"
}

func newHostAllow(patterns []string) (*hostAllow, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	a := &hostAllow{exact: map[string]bool{}}
	for _, p := range patterns {
		p = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(p)), ".") // "example.com." is example.com
		switch {
		case strings.HasPrefix(p, "*.") && len(p) > 2 && !strings.ContainsAny(p[2:], "*/: "):
			a.suffix = append(a.suffix, p[1:])
		case p != "" && !strings.ContainsAny(p, "*/ "):
			a.exact[strings.Trim(p, "[]")] = true
		default:
			return nil, invalid("allow-host", p, "a host name or IP (api.example.com, 10.0.0.5) or a subdomain wildcard (*.example.com)")
		}
	}
	return a, nil
}

func (a *hostAllow) allows(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a.exact[host] {
		return true
	}
	for _, s := range a.suffix {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// metadataAddrs are cloud metadata services outside the link-local
// ranges: AWS over IPv6, Alibaba Cloud, Oracle Cloud.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("192.0.0.192"),
}

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a9fe:a9fe
// reaches 169.254.169.254 through a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// forbiddenAddr reports link-local and cloud metadata addresses (also
// behind a NAT64 prefix), refused whenever an allowlist is set.
func forbiddenAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || slices.Contains(metadataAddrs, ip)
}

// dialControl refuses, at connect time, an address forbiddenAddr names:
// the address DNS gave the dialer, so a name that resolved to an allowed
// address when it was checked and to a metadata address now is refused
// all the same (DNS rebinding).
func dialControl(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("allowlist: dial address %q: %w", address, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil && forbiddenAddr(ip) {
		return fmt.Errorf("allowlist: refusing to connect to %s, a link-local or metadata address", address)
	}
	return nil
}

func (c *Client) checkHost(raw string) error {
	if c.allow == nil {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("url", c.red.URL(raw), "an absolute http(s) URL")
	}
	h := u.Hostname()
	if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && forbiddenAddr(ip) {
		return invalid("url host", h, "no link-local or metadata addresses (169.254.0.0/16, fe80::/10, 100.100.100.200, 192.0.0.192, fd00:ec2::254) while an allowlist is set")
	}
	if !c.allow.allows(h) {
		return invalid("url host", h, "a host on the allowlist")
	}
	return nil
}

// SendCheck returns a function for runner.Config.CheckSend that re-checks a
// job's host against the allowlist at send time, after DNS resolution, so a
// name that now resolves to a link-local or metadata address is refused. It
// returns nil when no allowlist is set.
func SendCheck(allowHosts []string) (func(ctx context.Context, rawURL string) error, error) {
	a, err := newHostAllow(allowHosts)
	if err != nil || a == nil {
		return nil, err
	}
	return func(ctx context.Context, rawURL string) error {
		u, err := url.Parse(rawURL)
		if err != nil {
			return fmt.Errorf("allowlist: bad url: %v: %w", err, runner.ErrNotAllowed)
		}
		h := u.Hostname()
		if !a.allows(h) {
			return fmt.Errorf("allowlist: host %q is not on the allowlist: %w", h, runner.ErrNotAllowed)
		}
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		if err != nil {
			return fmt.Errorf("allowlist: resolving %q: %w", h, err)
		}
		for _, ip := range addrs {
			if forbiddenAddr(ip) {
				return fmt.Errorf("allowlist: host %q resolves to %s, a link-local or metadata address: %w", h, ip, runner.ErrNotAllowed)
			}
		}
		return nil
	}, nil
}

// templateURL is a status URL template with its placeholders filled, for
// checking its host.
func templateURL(tpl string) string {
	return strings.NewReplacer("{key}", "k", "{id}", "i").Replace(tpl)
}
