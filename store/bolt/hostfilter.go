package bolt

import "github.com/idemrun/idemrun/store"

// byHostAfter is how many due entries of hosts it passes over a claim
// reads in index order before it goes on host by host (dueByHost): in
// the usual claim few are passed over, and reading on is cheaper than a
// seek per host.
const byHostAfter = 256

// hostFilter is what a claim passes over by host: the request's
// SkipHosts, and the hosts its Admit refused earlier in the same call
// (their later jobs are passed over without asking again).
type hostFilter struct {
	skip    []string
	set     map[string]struct{} // skip as a set, for a long list
	refused map[string]struct{}
	admit   func(host string) bool
}

// newHostFilter returns the filter of a claim, or nil when it filters
// nothing: the claim then reads no hosts at all.
func newHostFilter(skip []string, admit func(host string) bool) *hostFilter {
	if len(skip) == 0 && admit == nil {
		return nil
	}
	f := &hostFilter{skip: skip, admit: admit}
	if len(skip) > 8 {
		f.set = make(map[string]struct{}, len(skip))
		for _, h := range skip {
			f.set[h] = struct{}{}
		}
	}
	return f
}

// skips reports whether jobs of host h are passed over.
func (f *hostFilter) skips(h []byte) bool {
	if _, ok := f.refused[string(h)]; ok {
		return true
	}
	if f.set != nil {
		_, ok := f.set[string(h)]
		return ok
	}
	for _, s := range f.skip {
		if s == string(h) {
			return true
		}
	}
	return false
}

// admits asks Admit about a job of host h that is claimed if it says
// yes, and remembers a refusal.
func (f *hostFilter) admits(h []byte) bool {
	if f.admit == nil {
		return true
	}
	ok := false
	inCaller(func() { ok = f.admit(string(h)) })
	if !ok {
		if f.refused == nil {
			f.refused = map[string]struct{}{}
		}
		f.refused[string(h)] = struct{}{}
	}
	return ok
}

// hostOf returns the claim host of a due entry: its value's, or, for an
// entry written without one, the loaded job's.
func hostOf(v []byte, j *store.Job) []byte {
	if h, ok := entryHost(v); ok {
		return h
	}
	return []byte(store.ClaimHost(j))
}

// hostValue is the index value naming host h.
func hostValue(h []byte) []byte {
	v := make([]byte, 1+len(h))
	v[0] = indexHostTag
	copy(v[1:], h)
	return v
}
