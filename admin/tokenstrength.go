package admin

import (
	"fmt"
	"math"
)

// What CheckToken requires of a token.
const (
	MinTokenLen      = 16
	MinTokenDistinct = 6
	MinTokenBits     = 64
)

// TokenAdvice says how to make a token CheckToken takes.
const TokenAdvice = "make one with `openssl rand -hex 32` or `head -c 32 /dev/urandom | base64`"

// maxTokenScan bounds the bytes the entropy estimate reads (its repeat
// search is quadratic): a token strong enough shows it well before.
const maxTokenScan = 1024

// WeakTokenError is CheckToken's refusal. Reason says what the token
// lacks ("only 3 distinct characters"), never what it is.
type WeakTokenError struct{ Reason string }

func (e *WeakTokenError) Error() string {
	return fmt.Sprintf("admin: weak token: %s; want at least %d characters, %d of them distinct, and about %d bits of entropy; %s",
		e.Reason, MinTokenLen, MinTokenDistinct, MinTokenBits, TokenAdvice)
}

// CheckToken reports whether token is strong enough for the admin API on
// TCP: at least MinTokenLen bytes, MinTokenDistinct distinct ones, and an
// estimated MinTokenBits bits of entropy. The estimate counts each byte
// at the size of its character classes (lower case, upper case, digits,
// the rest) and counts nothing for a byte that continues a run (aaa, abc,
// cba) or repeats what came before (abab, passwordpassword), so a random
// token of 16 hex digits passes and a pattern does not. A refusal is a
// *WeakTokenError.
func CheckToken(token string) error {
	var seen [256]bool
	distinct := 0
	for i := 0; i < len(token); i++ {
		if !seen[token[i]] {
			seen[token[i]] = true
			distinct++
		}
	}
	switch {
	case len(token) < MinTokenLen:
		return &WeakTokenError{fmt.Sprintf("only %d characters", len(token))}
	case distinct < MinTokenDistinct:
		if distinct == 1 {
			return &WeakTokenError{"one character repeated"}
		}
		return &WeakTokenError{fmt.Sprintf("only %d distinct characters", distinct)}
	}
	if bits := tokenBits(token); bits < MinTokenBits {
		return &WeakTokenError{fmt.Sprintf("about %.0f bits of entropy, runs such as aaaa or abcd and repeats counting for nothing", bits)}
	}
	return nil
}

// tokenBits estimates the entropy of token as CheckToken says, stopping
// once MinTokenBits is reached.
func tokenBits(token string) float64 {
	var lower, upper, digit, other bool
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		default:
			other = true
		}
	}
	pool := 0
	for _, class := range []struct {
		in   bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 32}} {
		if class.in {
			pool += class.size
		}
	}
	per := math.Log2(float64(pool))
	t := token[:min(len(token), maxTokenScan)]
	bits := 0.0
	for i := 0; i < len(t) && bits < MinTokenBits; i++ {
		if !predictable(t, i) {
			bits += per
		}
	}
	return bits
}

// predictable reports whether t[i] continues a run (the step from t[i-1]
// is the step before it, of -1, 0 or +1) or a repeat (t[i-1:i+1] appeared
// before).
func predictable(t string, i int) bool {
	if i >= 2 {
		d1, d0 := int(t[i])-int(t[i-1]), int(t[i-1])-int(t[i-2])
		if d1 == d0 && d1 >= -1 && d1 <= 1 {
			return true
		}
	}
	for p := 1; p < i; p++ {
		if t[i] == t[i-p] && t[i-1] == t[i-1-p] {
			return true
		}
	}
	return false
}
