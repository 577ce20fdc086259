package admin_test

import (
	"strings"
	"testing"

	"github.com/idemrun/idemrun/admin"
)

// Tokens with too little variety are refused, saying what they lack;
// tokens made as the refusal says pass. Before, aaaaaaaaaaaaaaaa was taken
// (found by a probe).
func TestCheckToken(t *testing.T) {
	for _, weak := range []string{
		"aaaaaaaaaaaaaaaa", "abababababababab", "abcdefghijklmnop", "0123456789abcdef", "1234567890123456",
		"passwordpassword", "password12345678", "letmein123456789", "0123456789abcdef0123", "short",
		strings.Repeat("ab", 200), strings.Repeat("x7", 1000) + "Q",
	} {
		err := admin.CheckToken(weak)
		if err == nil {
			t.Errorf("CheckToken(%q) = nil, want refused", weak)
			continue
		}
		if strings.Contains(err.Error(), weak) {
			t.Errorf("CheckToken(%q) shows the token: %v", weak, err)
		}
	}
	for _, strong := range []string{
		"3f9c1e7a52d84b06a1c9e5f27d3b8a40",             // openssl rand -hex 16
		"Zk3u9Qm1X0b7RrT2pLw8yA5cVn4sHd6eJf0gKq1oMi8=", // head -c 32 /dev/urandom | base64
		"test-admin-token-0123456789abcdef",
		"tcp-admin-token-0123456789abcdef",
		"c41f07d9a2e86b35", // 16 random hex digits
	} {
		if err := admin.CheckToken(strong); err != nil {
			t.Errorf("CheckToken(%q) = %v, want nil", strong, err)
		}
	}
}
