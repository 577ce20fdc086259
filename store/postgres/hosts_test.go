package postgres_test

import (
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
)

// TestHostPoliciesShared: a policy one node sets is every node's at
// once, and outlasts the handle that set it.
func TestHostPoliciesShared(t *testing.T) {
	a, url, schema := newStore(t, nil)
	b := openStore(t, url, &postgres.Options{Schema: schema})
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := a.UpdateHostPolicy(ctx, "api.example.com", func(p *store.HostPolicy, _ bool) error {
		p.Paused, p.Note, p.UpdatedAt = true, "shared", now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ps, err := b.HostPolicies()
	if err != nil || len(ps) != 1 || !ps[0].Paused || ps[0].Note != "shared" || !ps[0].UpdatedAt.Equal(now) {
		t.Fatalf("another node's HostPolicies = %+v, %v; want the pause", ps, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	c := openStore(t, url, &postgres.Options{Schema: schema})
	if ps, err := c.HostPolicies(); err != nil || len(ps) != 1 || ps[0].Host != "api.example.com" {
		t.Errorf("HostPolicies after the setter closed = %+v, %v", ps, err)
	}
	// The other node's changes build on this one's.
	if _, err := c.UpdateHostPolicy(ctx, "api.example.com", func(p *store.HostPolicy, exists bool) error {
		if !exists || !p.Paused {
			t.Errorf("UpdateHostPolicy on another node saw %+v, exists %v", *p, exists)
		}
		p.Paused, p.Note = false, ""
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := b.HostPolicies(); len(ps) != 1 || ps[0].Paused {
		t.Errorf("after the resume on another node: %+v", ps)
	}
}

// TestCheckReportsDamagedHostPolicy: a policy row that does not decode,
// or names another host, is a problem Check reports, and HostPolicies
// refuses to answer a partial set.
func TestCheckReportsDamagedHostPolicy(t *testing.T) {
	db, url, schema := newStore(t, nil)
	exec(t, url, schema, `INSERT INTO {schema}.hosts (host, policy) VALUES ('a.example.com', '{"host":"b.example.com"}'), ('c.example.com', '{"host":"c.example.com","speed":1}')`)
	rep, err := db.Check()
	if err != nil || len(rep.Problems) != 2 {
		t.Errorf("Check = %+v, %v; want the two damaged policies", rep, err)
	}
	if _, err := db.HostPolicies(); err == nil {
		t.Errorf("HostPolicies with damaged rows: no error")
	}
	exec(t, url, schema, `DELETE FROM {schema}.hosts`)
}
