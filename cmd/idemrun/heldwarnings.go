package main

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/idemrun/idemrun/store/bolt"
)

// heldWarnings holds what api.Open warns about until the open's outcome
// is known: advice about a file's mode is noise when the file turns out
// not to be an idemrun database at all. After release it passes writes
// through.
type heldWarnings struct {
	w       io.Writer
	mu      sync.Mutex
	buf     bytes.Buffer
	through bool
}

func holdWarnings(w io.Writer) *heldWarnings { return &heldWarnings{w: w} }

func (h *heldWarnings) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.through {
		return h.w.Write(p)
	}
	return h.buf.Write(p)
}

// release writes the held warnings unless the open failed because the
// path is not an idemrun database, and lets later ones through.
func (h *heldWarnings) release(openErr error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !errors.Is(openErr, bolt.ErrNotDatabase) {
		_, _ = h.w.Write(h.buf.Bytes())
	}
	h.buf.Reset()
	h.through = true
}
