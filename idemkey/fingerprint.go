package idemkey

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
)

// fingerprintVersion is hashed first, so a future change of the encoding can
// never collide with fingerprints stored today.
const fingerprintVersion = "idemkey-fingerprint-v1"

// Fingerprint returns "sha256:" followed by the lowercase hex SHA-256 of the
// request that method, rawURL, h and body describe. Equal requests give equal
// fingerprints, whatever the iteration order of h; a store compares them to
// catch a key reused for a different request.
//
// The hash covers, in this order, each as an 8-byte big-endian length
// followed by its bytes (counts are 8-byte big-endian numbers), after a
// version tag:
//   - the method, upper-cased;
//   - rawURL exactly as given (not parsed or normalized);
//   - the number of defining headers, then for each, sorted by canonical
//     name (http.CanonicalHeaderKey): the name, the number of values, and
//     the values in their original order (values of names that differ only
//     in case are merged, in sorted order of the raw names);
//   - body.
//
// A header is defining unless its canonical name is one of:
//   - the key itself: Idempotency-Key, X-Idempotency-Key;
//   - credentials, since rotating them does not change what the request
//     means: Authorization, Proxy-Authorization, Cookie, X-Api-Key;
//   - hop-by-hop: Connection, Keep-Alive, Te, Trailer, Transfer-Encoding,
//     Upgrade, Proxy-Connection;
//   - volatile tracing: Date, Traceparent, Tracestate, X-Request-Id,
//     User-Agent.
//
// A name with no values counts as absent.
func Fingerprint(method, rawURL string, h http.Header, body []byte) string {
	sum := sha256.New()
	w := fingerprintWriter{h: sum}
	w.str(fingerprintVersion)
	w.str(strings.ToUpper(method))
	w.str(rawURL)

	raw := make([]string, 0, len(h))
	for name, vals := range h {
		if len(vals) > 0 && !excludedHeader(http.CanonicalHeaderKey(name)) {
			raw = append(raw, name)
		}
	}
	slices.Sort(raw)
	merged := make(map[string][]string, len(raw))
	names := make([]string, 0, len(raw))
	for _, name := range raw {
		c := http.CanonicalHeaderKey(name)
		if _, ok := merged[c]; !ok {
			names = append(names, c)
		}
		merged[c] = append(merged[c], h[name]...)
	}
	slices.Sort(names)

	w.num(len(names))
	for _, name := range names {
		vals := merged[name]
		w.str(name)
		w.num(len(vals))
		for _, v := range vals {
			w.str(v)
		}
	}
	w.num(len(body))
	sum.Write(body)
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

// excludedHeader reports whether the canonical header name does not define
// the request (see Fingerprint).
func excludedHeader(canonical string) bool {
	switch canonical {
	case "Idempotency-Key", "X-Idempotency-Key",
		"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key",
		"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Connection",
		"Date", "Traceparent", "Tracestate", "X-Request-Id", "User-Agent":
		return true
	}
	return false
}

// fingerprintWriter writes length-prefixed fields into a hash.
type fingerprintWriter struct {
	h   hash.Hash
	buf [8]byte
}

func (w *fingerprintWriter) num(n int) {
	binary.BigEndian.PutUint64(w.buf[:], uint64(n))
	w.h.Write(w.buf[:])
}

func (w *fingerprintWriter) str(s string) {
	w.num(len(s))
	io.WriteString(w.h, s)
}
