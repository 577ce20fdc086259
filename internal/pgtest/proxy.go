package pgtest

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server that can end a
// connection while a commit is in flight: the server receives the COMMIT
// and commits, and the client never hears the outcome, as when a network
// or a server's host fails at that moment. Everything else passes
// through unchanged.
type Proxy struct {
	// URL is the server's URL with the proxy's address in its place.
	URL string

	ln      net.Listener
	target  string
	cutProb atomic.Uint64 // the probability, in units of 2⁻³²
	cuts    atomic.Int64
	commits atomic.Int64

	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartProxy starts a proxy in front of the server at serverURL. seed
// drives which commits are cut.
func StartProxy(serverURL string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("pgtest: proxy: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgtest: proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: u.Host, rng: rand.New(rand.NewPCG(seed, 0x9e)), conns: map[net.Conn]struct{}{}}
	u.Host = ln.Addr().String()
	p.URL = u.String()
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// SetCutAfterCommit sets the probability that a COMMIT is forwarded and
// its connection then cut, before the server's answer reaches the client.
func (p *Proxy) SetCutAfterCommit(prob float64) {
	p.cutProb.Store(uint64(min(max(prob, 0), 1) * (1 << 32)))
}

// Commits counts the COMMITs that passed the proxy; Cuts those whose
// connection it cut.
func (p *Proxy) Commits() int64 { return p.commits.Load() }
func (p *Proxy) Cuts() int64    { return p.cuts.Load() }

// Close stops the proxy, ends every connection through it and returns
// once its goroutines have.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.clientToServer(c, s) }()
		go func() { defer p.wg.Done(); io.Copy(c, s); c.Close(); s.Close() }()
	}
}

// track records a pair of connections for Close; false once closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

// roll reports whether to cut after this commit.
func (p *Proxy) roll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Uint64N(1<<32) < p.cutProb.Load()
}

// maxMessage bounds a message the proxy reads whole (1 GiB is the
// protocol's own limit).
const maxMessage = 1 << 30

// clientToServer forwards the client's messages one at a time: the
// startup packets (no type byte), then typed messages. A simple query
// that is a COMMIT may be cut: the client's connection is closed first, so
// no answer reaches it, then the COMMIT is written to the server and its
// connection closed after it (the server reads what was sent before the
// close, and commits).
func (p *Proxy) clientToServer(c, s net.Conn) {
	defer p.forget(c, s)
	startup := true
	for {
		var typ byte
		var hdr [4]byte
		if !startup {
			var t [1]byte
			if _, err := io.ReadFull(c, t[:]); err != nil {
				return
			}
			typ = t[0]
		}
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n < 4 || n > maxMessage {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		var msg []byte
		if startup {
			msg = append(hdr[:], body...)
			// An SSL or GSS encryption request is followed by the real
			// startup packet; anything else is the startup packet.
			code := uint32(0)
			if len(body) >= 4 {
				code = binary.BigEndian.Uint32(body[:4])
			}
			startup = code == 80877103 || code == 80877104
		} else {
			msg = append(append([]byte{typ}, hdr[:]...), body...)
		}
		cut := false
		if typ == 'Q' && isCommit(body) {
			p.commits.Add(1)
			cut = p.roll()
		}
		if cut {
			// Counted before the client can see the cut.
			p.cuts.Add(1)
			c.Close()
			_, _ = s.Write(msg)
			return
		}
		if _, err := s.Write(msg); err != nil {
			return
		}
	}
}

// isCommit reports whether a simple query's text is a COMMIT (pgx
// commits with the simple query "commit").
func isCommit(body []byte) bool {
	q := strings.TrimSpace(strings.TrimRight(string(body), "\x00"))
	q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	return strings.EqualFold(q, "commit") || strings.EqualFold(q, "end")
}
