package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/idemrun/idemrun/store"
)

// bucketHosts holds the host policies: host → the policy as JSON. Files
// written before policies existed lack it until the first policy is set.
var bucketHosts = []byte("hosts")

var _ store.Hosts = (*DB)(nil)

// HostPolicies returns every policy, ordered by host (see store.Hosts).
func (db *DB) HostPolicies() ([]store.HostPolicy, error) {
	var out []store.HostPolicy
	err := db.view(func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketHosts)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			p, err := decodePolicy(k, v)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// UpdateHostPolicy changes host's policy in one write (see store.Hosts).
// fn runs in the writer's transaction and may run more than once.
func (db *DB) UpdateHostPolicy(ctx context.Context, host string, fn func(p *store.HostPolicy, exists bool) error) (store.HostPolicy, error) {
	if host == "" {
		return store.HostPolicy{}, errors.New("store: a host policy needs a host")
	}
	if err := ctx.Err(); err != nil {
		return store.HostPolicy{}, err
	}
	var out store.HostPolicy
	err := db.write(func(tx *bbolt.Tx) error {
		p := store.HostPolicy{Host: host}
		exists := false
		if b := tx.Bucket(bucketHosts); b != nil {
			if v := b.Get([]byte(host)); v != nil {
				var err error
				if p, err = decodePolicy([]byte(host), v); err != nil {
					return nothingWritten(err)
				}
				exists = true
			}
		}
		var ferr error
		inCaller(func() { ferr = fn(&p, exists) })
		if ferr != nil {
			return nothingWritten(ferr)
		}
		if p.Host != host {
			return nothingWritten(fmt.Errorf("store: host policy %q: the update changed its host to %q", host, p.Host))
		}
		v, err := json.Marshal(p)
		if err != nil {
			return nothingWritten(fmt.Errorf("store: host policy %q: %w", host, err))
		}
		b, err := tx.CreateBucketIfNotExists(bucketHosts)
		if err != nil {
			return fatal(err)
		}
		if err := fatal(b.Put([]byte(host), v)); err != nil {
			return err
		}
		out = p
		return nil
	})
	return out, err
}

// UnsetHostPolicy deletes host's policy; store.ErrNotFound when it has
// none.
func (db *DB) UnsetHostPolicy(ctx context.Context, host string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.write(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketHosts)
		if b == nil || b.Get([]byte(host)) == nil {
			return nothingWritten(fmt.Errorf("%w: no policy for host %q", store.ErrNotFound, host))
		}
		return fatal(b.Delete([]byte(host)))
	})
}

func decodePolicy(k, v []byte) (store.HostPolicy, error) {
	var p store.HostPolicy
	if err := json.Unmarshal(v, &p); err != nil {
		return p, fmt.Errorf("%w: host policy %q does not decode: %v", ErrCorruptRecord, k, err)
	}
	p.Host = string(k)
	return p, nil
}
