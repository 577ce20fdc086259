package bolt

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
)

// bucketHostDue indexes the due states' entries (pending, unknown) by
// claim host: state | len(host) (2 bytes) | host | time | id, with an
// empty value, beside the index's state | time | id. A claim whose first
// entries are mostly of hosts it passes over (paused, at their rate)
// goes on through it host by host, so however many jobs of such hosts
// are due first, the other hosts' jobs are found at the cost of a seek
// per host. Schema 2 added it: opening a schema 1 file for writing
// builds it.
var bucketHostDue = []byte("hostdue")

// hostDueKey is the hostdue key of the index entry ik (state | time | id)
// of claim host h.
func hostDueKey(ik, h []byte) []byte {
	k := make([]byte, 0, 1+2+len(h)+len(ik)-1)
	k = append(k, ik[0])
	k = binary.BigEndian.AppendUint16(k, uint16(len(h)))
	k = append(k, h...)
	return append(k, ik[1:]...)
}

// hostDuePrefix is the start of host h's hostdue keys of state byte sb.
func hostDuePrefix(sb byte, h []byte) []byte {
	k := make([]byte, 0, 3+len(h))
	k = append(k, sb)
	k = binary.BigEndian.AppendUint16(k, uint16(len(h)))
	return append(k, h...)
}

// splitHostDue returns the host of a hostdue key and its index key.
func splitHostDue(k []byte) (host, ik []byte, ok bool) {
	if len(k) < 3 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(k[1:3]))
	if len(k) != 3+n+8+16 {
		return nil, nil, false
	}
	ik = make([]byte, 0, 1+8+16)
	ik = append(ik, k[0])
	ik = append(ik, k[3+n:]...)
	return k[3 : 3+n], ik, true
}

// maxHostLen is the longest host hostdue keys hold; a URL's host is far
// shorter (DNS names are at most 253 bytes).
const maxHostLen = 1 << 15

// putHostDue adds the hostdue entry of index entry ik valued v, when v
// names a host (a due state's).
func (b buckets) putHostDue(ik, v []byte) error {
	h, ok := entryHost(v)
	if !ok || b.hostdue == nil || len(h) > maxHostLen {
		return nil
	}
	return fatal(b.hostdue.Put(hostDueKey(ik, h), nil))
}

// deleteHostDue removes the hostdue entry of index entry ik valued v.
func (b buckets) deleteHostDue(ik, v []byte) error {
	h, ok := entryHost(v)
	if !ok || b.hostdue == nil || len(h) > maxHostLen {
		return nil
	}
	return fatal(b.hostdue.Delete(hostDueKey(ik, h)))
}

// buildHostDue fills hostdue from the index, and names the host of every
// due entry written without one (files from before host tags), reading
// it from the record.
func buildHostDue(tx *bbolt.Tx) error {
	hd, err := tx.CreateBucketIfNotExists(bucketHostDue)
	if err != nil {
		return err
	}
	index, jobs := tx.Bucket(bucketIndex), tx.Bucket(bucketJobs)
	for _, s := range []store.State{store.StatePending, store.StateUnknown} {
		sb := stateByte[s]
		var untagged [][2][]byte
		c := index.Cursor()
		for k, v := c.Seek([]byte{sb}); k != nil && k[0] == sb; k, v = c.Next() {
			h, ok := entryHost(v)
			if !ok {
				j, err := DecodeRecord(jobs.Get(k[9:]))
				if err != nil {
					continue // Check reports the record
				}
				h = []byte(store.ClaimHost(j))
				untagged = append(untagged, [2][]byte{append([]byte(nil), k...), hostValue(h)})
			}
			if len(h) > maxHostLen {
				continue
			}
			if err := hd.Put(hostDueKey(k, h), nil); err != nil {
				return err
			}
		}
		for _, e := range untagged {
			if err := index.Put(e[0], e[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHostDue reports, through add, the hostdue entries that do not
// match an index entry and the due index entries without one.
func checkHostDue(tx *bbolt.Tx, add func(format string, a ...any)) error {
	hd := tx.Bucket(bucketHostDue)
	if hd == nil {
		return nil // a schema 1 file, opened read-only
	}
	index := tx.Bucket(bucketIndex)
	n := 0
	if err := hd.ForEach(func(k, _ []byte) error {
		n++
		h, ik, ok := splitHostDue(k)
		if !ok {
			add("hostdue entry %x does not parse", k)
			return nil
		}
		if v := index.Get(ik); v == nil {
			add("hostdue entry %x has no index entry", k)
		} else if eh, _ := entryHost(v); !bytes.Equal(eh, h) {
			add("hostdue entry %x names host %q, its index entry %q", k, h, eh)
		}
		return nil
	}); err != nil {
		return err
	}
	due := 0
	for _, s := range []store.State{store.StatePending, store.StateUnknown} {
		sb := stateByte[s]
		c := index.Cursor()
		for k, v := c.Seek([]byte{sb}); k != nil && k[0] == sb; k, v = c.Next() {
			if h, ok := entryHost(v); ok && len(h) <= maxHostLen {
				due++
				if hd.Get(hostDueKey(k, h)) == nil {
					add("index entry %x (host %q) has no hostdue entry", k, h)
				}
			} else if !ok {
				add("index entry %x of a due state names no host", k)
			}
		}
	}
	if due != n {
		add("hostdue holds %d entries, the index %d due ones", n, due)
	}
	return nil
}

// hostLane is one host's due entries in a claim that goes on by host.
type hostLane struct {
	host []byte
	c    *bbolt.Cursor
	k    []byte // the lane's current hostdue key
	ik   []byte // its index key
}

// hostLanes is a heap of lanes, the earliest index key first.
type hostLanes []*hostLane

func (h hostLanes) Len() int           { return len(h) }
func (h hostLanes) Less(i, j int) bool { return bytes.Compare(h[i].ik, h[j].ik) < 0 }
func (h hostLanes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hostLanes) Push(x any)        { *h = append(*h, x.(*hostLane)) }
func (h *hostLanes) Pop() any {
	old := *h
	l := old[len(old)-1]
	*h = old[:len(old)-1]
	return l
}

// dueByHost calls visit with each due index entry of state byte sb from
// index key from on, up to bound (a dueBound), in index order, passing
// over every host f skips without reading its entries; visit returns
// false to stop, and skip reports the hosts passed over from then on
// (those Admit refused). It reports an error for a hostdue key that does
// not parse.
func dueByHost(b buckets, sb byte, from, bound []byte, skips func(h []byte) bool, visit func(ik, v []byte) bool) error {
	var lanes hostLanes
	// seekLane positions a lane at its first entry at or after from; it
	// reports false when the host has none due.
	seekLane := func(l *hostLane, k []byte) bool {
		if k == nil || !bytes.HasPrefix(k, hostDuePrefix(sb, l.host)) {
			return false
		}
		h, ik, ok := splitHostDue(k)
		if !ok || !bytes.Equal(h, l.host) || bytes.Compare(ik[:9], bound) > 0 {
			return false
		}
		l.k, l.ik = k, ik
		return true
	}
	hosts := b.hostdue.Cursor()
	for k, _ := hosts.Seek([]byte{sb}); k != nil && k[0] == sb; {
		h, _, ok := splitHostDue(k)
		if !ok {
			return fmt.Errorf("%w: hostdue key %x does not parse", ErrCorruptRecord, k)
		}
		h = append([]byte(nil), h...)
		if !skips(h) {
			l := &hostLane{host: h, c: b.hostdue.Cursor()}
			start := append(hostDuePrefix(sb, h), from[1:]...)
			if kk, _ := l.c.Seek(start); seekLane(l, kk) {
				lanes = append(lanes, l)
			}
		}
		// The next host: past every key of this one.
		k, _ = hosts.Seek(append(hostDuePrefix(sb, h), bytes.Repeat([]byte{0xff}, 8+16+1)...))
	}
	heap.Init(&lanes)
	for lanes.Len() > 0 {
		l := lanes[0]
		if skips(l.host) {
			heap.Pop(&lanes)
			continue
		}
		v := b.index.Get(l.ik)
		if v != nil && !visit(l.ik, v) {
			return nil
		}
		if kk, _ := l.c.Next(); seekLane(l, kk) {
			heap.Fix(&lanes, 0)
		} else {
			heap.Pop(&lanes)
		}
	}
	return nil
}
