package store

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// lastID is the time part of the last id NewID made, so ids made in one
// process are strictly increasing even within one clock tick.
var lastID struct {
	sync.Mutex
	t int64
}

// NewID returns a new job id: a UUIDv7 (RFC 9562) whose first 60 bits are
// the time in milliseconds and 1/4096ths of one, so ids sort in creation
// order, inserts append to a backend's id index and the id shows when the
// job was made. The rest is random.
func NewID() string {
	now := time.Now().UnixNano()
	t := now/1e6<<12 | (now%1e6)*4096/1e6
	lastID.Lock()
	if t <= lastID.t {
		t = lastID.t + 1
	}
	lastID.t = t
	lastID.Unlock()

	var b [16]byte
	_, _ = rand.Read(b[8:]) // crypto/rand.Read never fails
	ms := t >> 12
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	b[6] = 0x70 | byte(t>>8&0x0f)
	b[7] = byte(t)
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
