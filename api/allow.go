package api

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
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
		p = strings.ToLower(strings.TrimSpace(p))
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
	host = strings.ToLower(strings.Trim(host, "[]"))
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

// forbiddenAddr reports link-local and cloud metadata addresses, refused
// whenever an allowlist is set.
func forbiddenAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip == netip.MustParseAddr("169.254.169.254") || ip == netip.MustParseAddr("fd00:ec2::254")
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
		return invalid("url host", h, "no link-local or metadata addresses (169.254.0.0/16, fe80::/10) while an allowlist is set")
	}
	if !c.allow.allows(h) {
		return invalid("url host", h, "a host on the allowlist (--allow-host)")
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
			return fmt.Errorf("allowlist: bad url: %w", err)
		}
		h := u.Hostname()
		if !a.allows(h) {
			return fmt.Errorf("allowlist: host %q is not allowed (--allow-host)", h)
		}
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		if err != nil {
			return fmt.Errorf("allowlist: resolving %q: %w", h, err)
		}
		for _, ip := range addrs {
			if forbiddenAddr(ip) {
				return fmt.Errorf("allowlist: host %q resolves to %s, a link-local or metadata address", h, ip)
			}
		}
		return nil
	}, nil
}
