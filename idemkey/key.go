package idemkey

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/google/uuid"
)

// HeaderName is the HTTP header that carries the idempotency key.
const HeaderName = "Idempotency-Key"

// MaxLen is the longest key Validate accepts, in bytes (255, the limit Stripe
// and most targets document).
const MaxLen = 255

// Accepted describes the valid key syntax (Validate's rules); every
// validation error ends with it, so a person reading a log knows how to fix
// the key.
const Accepted = "1-255 printable ASCII characters (0x21-0x7E), no spaces or control characters, not starting with a double quote"

// keyShownLen is how many bytes of a bad key an error message repeats.
const keyShownLen = 40

// ErrInvalidKey is the sentinel every *InvalidKeyError matches with errors.Is.
var ErrInvalidKey = errors.New("idemkey: invalid key")

// InvalidKeyError reports a key (or an Idempotency-Key header value) that
// Validate or ParseHeader rejected, and why.
type InvalidKeyError struct {
	// Key is the rejected value, quoted with only ASCII characters and cut to
	// its first 40 bytes (a "..." suffix marks the cut), so it is safe to
	// print and log.
	Key string
	// Reason says what is wrong, e.g. "contains a space at byte 2".
	Reason string
}

// Error returns the message, naming the key, the reason and the accepted
// syntax.
func (e *InvalidKeyError) Error() string {
	return "idemkey: invalid key " + e.Key + ": " + e.Reason + "; accepted: " + Accepted
}

// Unwrap returns ErrInvalidKey, so errors.Is(err, ErrInvalidKey) holds.
func (e *InvalidKeyError) Unwrap() error { return ErrInvalidKey }

func invalid(key, reason string) *InvalidKeyError {
	shown := key
	suffix := ""
	if len(shown) > keyShownLen {
		shown, suffix = shown[:keyShownLen], "..."
	}
	return &InvalidKeyError{Key: strconv.QuoteToASCII(shown) + suffix, Reason: reason}
}

// New returns a new key: a random (version 4) UUID in its 36-character text
// form, drawn from crypto/rand.
//
// Version 4, not 7: the key is sent to third parties, and a v7 UUID would tell
// them when the job was enqueued; v4 carries 122 random bits and nothing else.
// Job IDs, which stay inside idemrun, are v7 for index locality.
func New() string {
	return uuid.New().String()
}

// NewFromReader is New with the random bytes read from r, for deterministic
// tests. It returns an error only when r fails.
func NewFromReader(r io.Reader) (string, error) {
	u, err := uuid.NewRandomFromReader(r)
	if err != nil {
		return "", fmt.Errorf("idemkey: generate key: %w", err)
	}
	return u.String(), nil
}

// Validate reports whether key is acceptable as an idempotency key: 1 to
// MaxLen bytes, each a printable ASCII character (0x21-0x7E), so no spaces
// and no control characters, and not starting with a double quote (a leading
// quote would make the bare header value read as the structured form). The
// error, if any, is an *InvalidKeyError.
func Validate(key string) error {
	if key == "" {
		return invalid(key, "empty")
	}
	if len(key) > MaxLen {
		return invalid(key, fmt.Sprintf("too long: %d bytes, max %d", len(key), MaxLen))
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == ' ':
			return invalid(key, fmt.Sprintf("contains a space at byte %d", i))
		case c < 0x20 || c == 0x7F:
			return invalid(key, fmt.Sprintf("contains control character 0x%02X at byte %d", c, i))
		case c > 0x7F:
			return invalid(key, fmt.Sprintf("contains non-ASCII byte 0x%02X at byte %d", c, i))
		case c == '"' && i == 0:
			return invalid(key, "starts with a double quote, which reads as the structured header form")
		}
	}
	return nil
}
