package bolt

import (
	"github.com/google/uuid"
	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
)

// MarkClaiming marks id as being claimed by a claim round of db, as
// ClaimDue does while it prepares, and returns the unmark.
func MarkClaiming(db *DB, id string) (unmark func()) {
	db.mark(id)
	return func() { db.claiming.Delete(id) }
}

// SetIndexValue rewrites the value of every due job's index entry with
// fn's answer for its id: nil as files written before entries named
// their hosts, or a host of the test's choosing.
func SetIndexValue(db *DB, fn func(id string) []byte) error {
	return db.write(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketIndex).Cursor()
		var keys [][]byte
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if k[0] == stateByte[store.StatePending] || k[0] == stateByte[store.StateUnknown] {
				keys = append(keys, append([]byte(nil), k...))
			}
		}
		for _, k := range keys {
			if err := tx.Bucket(bucketIndex).Put(k, fn(uuid.UUID(k[9:]).String())); err != nil {
				return fatal(err)
			}
		}
		return nil
	})
}

// HostValue is the index value naming host.
func HostValue(host string) []byte { return hostValue([]byte(host)) }

// ClaimScan is claimScan.
const ClaimScan = claimScan
