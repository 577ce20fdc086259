package bolt

import (
	"encoding/binary"

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
// their hosts (the file is then one of schema 1, without the index by
// host, as those files are), or a host of the test's choosing (the index
// by host follows).
func SetIndexValue(db *DB, fn func(id string) []byte) error {
	return db.write(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketIndex).Cursor()
		var keys [][]byte
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if k[0] == stateByte[store.StatePending] || k[0] == stateByte[store.StateUnknown] {
				keys = append(keys, append([]byte(nil), k...))
			}
		}
		untagged := false
		for _, k := range keys {
			v := fn(uuid.UUID(k[9:]).String())
			_, tagged := entryHost(v)
			untagged = untagged || !tagged
			if err := tx.Bucket(bucketIndex).Put(k, v); err != nil {
				return fatal(err)
			}
		}
		if err := tx.DeleteBucket(bucketHostDue); err != nil {
			return fatal(err)
		}
		if untagged {
			v := make([]byte, 4)
			binary.BigEndian.PutUint32(v, 1)
			return fatal(tx.Bucket(bucketMeta).Put(metaSchema, v))
		}
		return fatal(buildHostDue(tx))
	})
}

// HostValue is the index value naming host.
func HostValue(host string) []byte { return hostValue([]byte(host)) }

// MakeSchema1 turns db's file into one of schema 1: no index by host,
// and index entries that name no host.
func MakeSchema1(db *DB) error {
	return db.update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketHostDue); err != nil {
			return err
		}
		c := tx.Bucket(bucketIndex).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if err := tx.Bucket(bucketIndex).Put(k, nil); err != nil {
				return err
			}
		}
		v := make([]byte, 4)
		binary.BigEndian.PutUint32(v, 1)
		return tx.Bucket(bucketMeta).Put(metaSchema, v)
	})
}

// HostDueLen counts the entries of the index by host.
func HostDueLen(db *DB) (int, error) {
	n := 0
	err := db.view(func(tx *bbolt.Tx) error {
		n = tx.Bucket(bucketHostDue).Stats().KeyN
		return nil
	})
	return n, err
}
