package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// Policies are kept across a reopen, ordered by host; an update sees the
// stored policy, an error from fn stores nothing, and unset deletes.
func TestHostPolicies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemrun.db")
	db := openAt(t, path, nil)
	if ps, err := db.HostPolicies(); err != nil || len(ps) != 0 {
		t.Fatalf("HostPolicies of a new file = %v, %v; want none", ps, err)
	}
	set := func(host string, fn func(p *store.HostPolicy, exists bool) error) store.HostPolicy {
		t.Helper()
		p, err := db.UpdateHostPolicy(ctx, host, fn)
		if err != nil {
			t.Fatalf("UpdateHostPolicy(%s): %v", host, err)
		}
		return p
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	set("b.example:8443", func(p *store.HostPolicy, exists bool) error {
		if exists || p.Host != "b.example:8443" {
			t.Errorf("first update sees %+v, exists %v; want the zero policy of its host", p, exists)
		}
		p.Rate, p.Burst, p.UpdatedAt = 40, 5, at
		return nil
	})
	set(store.DefaultHost, func(p *store.HostPolicy, _ bool) error { p.Concurrency = 8; return nil })
	got := set("b.example:8443", func(p *store.HostPolicy, exists bool) error {
		if !exists || p.Rate != 40 {
			t.Errorf("second update sees %+v, exists %v; want the stored policy", p, exists)
		}
		p.Paused, p.Note = true, "maintenance"
		return nil
	})
	if !got.Paused || got.Rate != 40 {
		t.Errorf("UpdateHostPolicy returned %+v", got)
	}
	boom := errors.New("refused")
	if _, err := db.UpdateHostPolicy(ctx, "b.example:8443", func(p *store.HostPolicy, _ bool) error { p.Rate = 1; return boom }); !errors.Is(err, boom) {
		t.Errorf("update whose fn fails: %v, want its error", err)
	}
	if _, err := db.UpdateHostPolicy(ctx, "c.example", func(p *store.HostPolicy, _ bool) error { p.Host = "d.example"; return nil }); err == nil {
		t.Error("update that changes the host: no error")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, nil)
	ps, err := db.HostPolicies()
	if err != nil || len(ps) != 2 {
		t.Fatalf("HostPolicies after reopen = %+v, %v; want 2", ps, err)
	}
	if ps[0].Host != store.DefaultHost || ps[0].Concurrency != 8 || ps[1].Host != "b.example:8443" || ps[1].Rate != 40 || !ps[1].Paused || ps[1].Note != "maintenance" || !ps[1].UpdatedAt.Equal(at) {
		t.Errorf("HostPolicies after reopen = %+v", ps)
	}
	if err := db.UnsetHostPolicy(ctx, "b.example:8443"); err != nil {
		t.Fatal(err)
	}
	if err := db.UnsetHostPolicy(ctx, "b.example:8443"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second unset: %v, want ErrNotFound", err)
	}
	if ps, _ := db.HostPolicies(); len(ps) != 1 {
		t.Errorf("after unset: %+v", ps)
	}
}
