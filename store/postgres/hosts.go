package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

var (
	_ store.Hosts       = (*DB)(nil)
	_ store.HostCounter = (*DB)(nil)
)

// HostPolicies returns every host policy, ordered by host (store.Hosts),
// from one snapshot. A policy that does not decode is an error
// (ErrCorruptRecord) naming its host: a runner must not apply a partial
// set.
func (db *DB) HostPolicies() ([]store.HostPolicy, error) {
	var out []store.HostPolicy
	err := db.snapshot(bg, func(tx pgx.Tx) error {
		var err error
		out, err = db.hostPolicies(bg, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (db *DB) hostPolicies(ctx context.Context, tx pgx.Tx) ([]store.HostPolicy, error) {
	rows, err := tx.Query(ctx, db.q.hostPolicies)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HostPolicy
	for rows.Next() {
		var host string
		var rec []byte
		if err := rows.Scan(&host, &rec); err != nil {
			return nil, err
		}
		p, err := decodePolicy(host, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// UpdateHostPolicy changes host's policy in one transaction (see
// store.Hosts): the row is locked, or a placeholder row inserted and
// locked when the host has none, so concurrent updates of one host, on
// any node, take turns and none is lost. An error from fn is returned as
// it is, and nothing is stored.
func (db *DB) UpdateHostPolicy(ctx context.Context, host string, fn func(p *store.HostPolicy, exists bool) error) (store.HostPolicy, error) {
	if host == "" || !utf8.ValidString(host) {
		return store.HostPolicy{}, fmt.Errorf("store: a host policy needs a host in valid UTF-8, not %q", host)
	}
	var out store.HostPolicy
	var fnErr error
	err := db.tx(ctx, func(tx pgx.Tx) error {
		p, exists, err := db.lockHost(ctx, tx, host)
		if err != nil {
			return err
		}
		if fnErr = fn(&p, exists); fnErr != nil {
			return fnErr
		}
		if p.Host != host {
			return fmt.Errorf("store: host policy %s: an update may not change its host (to %q)", host, p.Host)
		}
		rec, err := encodePolicy(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, db.q.hostPut, host, string(rec)); err != nil {
			return err
		}
		out = p
		return nil
	})
	if fnErr != nil {
		return store.HostPolicy{}, fnErr
	}
	if err != nil {
		return store.HostPolicy{}, err
	}
	return out, nil
}

// lockHost locks host's row in tx and returns its policy, or inserts a
// placeholder row (locked as inserted) and returns the zero policy for
// host with exists false.
func (db *DB) lockHost(ctx context.Context, tx pgx.Tx, host string) (store.HostPolicy, bool, error) {
	// Bounded: a row deleted between the insert's conflict and the lock
	// is inserted on the next round.
	for range 3 {
		tag, err := tx.Exec(ctx, db.q.hostReserve, host)
		if err != nil {
			return store.HostPolicy{}, false, err
		}
		if tag.RowsAffected() == 1 {
			return store.HostPolicy{Host: host}, false, nil
		}
		var rec []byte
		err = tx.QueryRow(ctx, db.q.hostLocked, host).Scan(&rec)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return store.HostPolicy{}, false, err
		}
		p, err := decodePolicy(host, rec)
		return p, true, err
	}
	return store.HostPolicy{}, false, fmt.Errorf("store: host policy %s: deleted and made again by others while this update waited; try again", host)
}

// UnsetHostPolicy deletes host's policy; a *store.NoPolicyError
// (store.ErrNotFound) when it has none.
func (db *DB) UnsetHostPolicy(ctx context.Context, host string) error {
	var none error
	err := db.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, db.q.hostDelete, host)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			none = &store.NoPolicyError{Host: host}
			return none
		}
		return nil
	})
	if none != nil {
		return none
	}
	return err
}

// HostCounts counts the pending and unknown jobs of each host by the
// host column (store.HostCounter), without decoding a job.
func (db *DB) HostCounts(ctx context.Context, now time.Time) ([]store.HostCount, error) {
	var out []store.HostCount
	err := db.snapshot(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, db.q.hostCounts, nanos(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c store.HostCount
			if err := rows.Scan(&c.Host, &c.Pending, &c.Unknown, &c.Due); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encodePolicy is the policy column's JSON: store.HostPolicy's own, in
// ASCII as job records are.
func encodePolicy(p store.HostPolicy) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("store: encode host policy %s: %w", p.Host, err)
	}
	return asciiJSON(b), nil
}

// decodePolicy decodes host's policy row. As with jobs, a field this
// idemrun does not know is refused: writing the policy back would lose it.
func decodePolicy(host string, rec []byte) (store.HostPolicy, error) {
	d := json.NewDecoder(bytes.NewReader(rec))
	d.DisallowUnknownFields()
	var p store.HostPolicy
	if err := d.Decode(&p); err != nil {
		return p, fmt.Errorf("%w: host policy %s: %v", ErrCorruptRecord, host, err)
	}
	if d.More() || p.Host != host {
		return p, fmt.Errorf("%w: host policy %s: its record names host %q, or has data after it", ErrCorruptRecord, host, p.Host)
	}
	return p, nil
}
