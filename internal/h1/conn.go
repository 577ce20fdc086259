package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// conn is one connection.
type conn struct {
	raw    net.Conn       // the TCP connection
	c      net.Conn       // raw, or the TLS connection over it
	rec    *recordTracker // under the TLS connection; nil for plain TCP
	in     budgetReader
	br     *bufio.Reader  // reads c through in
	out    countingWriter // writes to c, counting what c took
	bw     *bufio.Writer  // writes to c through out
	idleAt time.Time
}

// dial opens a connection to req's host, with TLS for https.
func (t *Transport) dial(ctx context.Context, req *http.Request) (*conn, error) {
	raw, err := t.dialer.DialContext(ctx, "tcp", keyOf(req.URL).addr)
	if err != nil {
		return nil, err
	}
	c := &conn{raw: raw, c: raw}
	if req.URL.Scheme == "https" {
		cfg := t.tlsConfig.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		c.rec = &recordTracker{Conn: raw}
		tc := tls.Client(c.rec, cfg)
		hctx, cancel := context.WithTimeout(ctx, t.tlsTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = raw.Close()
			return nil, err
		}
		c.c = tc
	}
	c.in = budgetReader{r: c.c, n: -1}
	c.br = bufio.NewReader(&c.in)
	c.out = countingWriter{w: c.c}
	c.bw = bufio.NewWriter(&c.out)
	return c, nil
}

func (c *conn) close() { _ = c.c.Close() }

// quiet reports whether nothing is waiting to be read above the socket:
// TLS reads records ahead into its own buffer, where a peek at the socket
// does not see them. A read with a deadline already past returns at once
// with a timeout when there is nothing, which leaves the connection
// usable; anything else (bytes, EOF, an alert) means it is out of step.
func (c *conn) quiet() bool {
	if c.c == c.raw {
		return true // plain TCP: the socket peek saw everything, and br is empty
	}
	if c.raw.SetReadDeadline(aLongTimeAgo) != nil {
		return false
	}
	_, err := c.br.Peek(1)
	if c.raw.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	var ne net.Error
	// A record that has begun to arrive but is not whole sits in the TLS
	// layer's raw input, where the peek cannot decrypt it: bytes are
	// waiting all the same.
	return errors.As(err, &ne) && ne.Timeout() && !c.rec.partial()
}

// recordTracker sits between a TLS connection and its socket and follows
// the TLS record framing of the bytes read, so that a record read in part
// (bytes the server sent that TLS cannot hand out yet) can be seen.
type recordTracker struct {
	net.Conn
	hdr  [5]byte
	nhdr int // bytes of the current record's header seen
	left int // bytes of the current record's payload still to come
}

func (r *recordTracker) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	for b := p[:n]; len(b) > 0; {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left -= k
			b = b[k:]
			continue
		}
		k := copy(r.hdr[r.nhdr:], b)
		r.nhdr += k
		b = b[k:]
		if r.nhdr == len(r.hdr) {
			r.left = int(r.hdr[3])<<8 | int(r.hdr[4])
			r.nhdr = 0
		}
	}
	return n, err
}

// partial reports whether the bytes read so far end inside a record.
func (r *recordTracker) partial() bool { return r != nil && (r.nhdr > 0 || r.left > 0) }

// maxHeaderBytes caps a response head, interim responses included, as
// net/http's Transport does by default.
const maxHeaderBytes = 10 << 20

var errHeaderTooLarge = errors.New("h1: server response headers exceeded 10 MiB")

// budgetReader reads from r at most n more bytes (no limit when n < 0).
type budgetReader struct {
	r io.Reader
	n int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, errHeaderTooLarge
	}
	if b.n > 0 && int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	if b.n > 0 {
		b.n -= int64(n)
	}
	return n, err
}

// countingWriter counts the bytes its writer took.
type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// aLongTimeAgo is a deadline in the past: it wakes blocked I/O at once.
var aLongTimeAgo = time.Unix(1, 0)
