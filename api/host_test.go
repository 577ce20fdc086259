package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
)

// pgClient is a client on a fresh migrated Postgres schema, at the fixed
// time now.
func pgClient(t *testing.T, now time.Time) *api.Client {
	t.Helper()
	url, schema := pgtest.Schema(t)
	opts := &api.Options{Postgres: &postgres.Options{Schema: schema}, Now: func() time.Time { return now }}
	if err := api.Migrate(context.Background(), url, opts); err != nil {
		t.Fatal(err)
	}
	c, err := api.Open(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// throughAdmin is a client of c through its admin API on TCP.
func throughAdmin(t *testing.T, c *api.Client) *api.Client {
	t.Helper()
	tok := "0123456789abcdef0123"
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: tok}))
	t.Cleanup(srv.Close)
	rem, err := api.DialTCP(strings.TrimPrefix(srv.URL, "http://"), tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rem.Close() })
	return rem
}

func ptr[T any](v T) *T { return &v }

// The host operations, on the store and through a runner's admin API:
// SetHost changes only the limits given and records who and when;
// PauseHost and ResumeHost set and clear the pause and its note, and a
// resume of a host not paused stores nothing; UnsetHost deletes the
// policy, ErrNotFound when there is none; bad input is an
// *InvalidError naming the field, and changes nothing.
func TestHostOperations(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, via := range []string{"store", "admin API"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			c := pgClient(t, now)
			if via == "admin API" {
				c = throughAdmin(t, c)
			}
			p, err := c.SetHost(ctx, "API.example.com", api.HostSettings{Rate: ptr(40.0), Burst: ptr(5)}, "alice")
			if err != nil {
				t.Fatalf("SetHost: %v", err)
			}
			want := api.HostPolicy{Host: "api.example.com", Rate: 40, Burst: 5, UpdatedAt: now, UpdatedBy: "alice"}
			if !p.UpdatedAt.Equal(now) || p.UpdatedAt.IsZero() {
				t.Errorf("UpdatedAt %v; want %v", p.UpdatedAt, now)
			}
			p.UpdatedAt = now
			if !reflect.DeepEqual(p, want) {
				t.Errorf("SetHost = %+v; want %+v", p, want)
			}
			p, err = c.SetHost(ctx, "api.example.com", api.HostSettings{Concurrency: ptr(3), Settle: ptr(6 * time.Second)}, "bob")
			if err != nil || p.Rate != 40 || p.Burst != 5 || p.Concurrency != 3 || p.Settle != 6*time.Second || p.UpdatedBy != "bob" {
				t.Errorf("second SetHost = %+v, %v; want the rate and burst kept, concurrency 3, settle 6s, by bob", p, err)
			}
			p, err = c.PauseHost(ctx, "api.example.com", "carol", "their 5xx storm")
			if err != nil || !p.Paused || p.Note != "their 5xx storm" || p.UpdatedBy != "carol" || p.Rate != 40 {
				t.Errorf("PauseHost = %+v, %v; want paused with the note, by carol, limits kept", p, err)
			}
			p, err = c.ResumeHost(ctx, "api.example.com", "dave")
			if err != nil || p.Paused || p.Note != "" || p.UpdatedBy != "dave" {
				t.Errorf("ResumeHost = %+v, %v; want not paused, no note, by dave", p, err)
			}
			// A resume with nothing to resume stores nothing.
			if p, err := c.ResumeHost(ctx, "other.example.com", "dave"); err != nil || p.Host != "other.example.com" || !p.UpdatedAt.IsZero() {
				t.Errorf("ResumeHost of a host without a policy = %+v, %v; want its zero policy", p, err)
			}
			if _, err := c.PauseHost(ctx, "*", "", "maintenance"); err != nil {
				t.Fatalf("PauseHost(*): %v", err)
			}
			ps, err := c.HostPolicies(ctx)
			if err != nil || len(ps) != 2 || ps[0].Host != "*" || !ps[0].Paused || ps[0].UpdatedBy != api.Actor() || ps[1].Host != "api.example.com" {
				t.Errorf("HostPolicies = %+v, %v; want * (paused, by %s) then api.example.com", ps, err, api.Actor())
			}

			before, _ := c.HostPolicies(ctx)
			for _, bad := range []struct {
				field string
				call  func() error
			}{
				{"host", func() error {
					_, err := c.SetHost(ctx, "https://api.example.com", api.HostSettings{Rate: ptr(1.0)}, "")
					return err
				}},
				{"host", func() error { _, err := c.PauseHost(ctx, "api.example.com/v1", "", ""); return err }},
				{"host", func() error { _, err := c.ResumeHost(ctx, "user@api.example.com", ""); return err }},
				{"host", func() error { return c.UnsetHost(ctx, "api .example.com") }},
				{"rate", func() error {
					_, err := c.SetHost(ctx, "api.example.com", api.HostSettings{Rate: ptr(0.0)}, "")
					return err
				}},
				{"rate", func() error {
					_, err := c.SetHost(ctx, "api.example.com", api.HostSettings{Rate: ptr(-1.0)}, "")
					return err
				}},
				{"burst", func() error {
					_, err := c.SetHost(ctx, "api.example.com", api.HostSettings{Burst: ptr(0)}, "")
					return err
				}},
				{"concurrency", func() error {
					_, err := c.SetHost(ctx, "api.example.com", api.HostSettings{Concurrency: ptr(-2)}, "")
					return err
				}},
				{"settle", func() error {
					_, err := c.SetHost(ctx, "api.example.com", api.HostSettings{Settle: ptr(-time.Second)}, "")
					return err
				}},
				{"settle", func() error {
					_, err := c.SetHost(ctx, "api.example.com", api.HostSettings{Settle: ptr(2 * time.Hour)}, "")
					return err
				}},
				{"note", func() error {
					_, err := c.PauseHost(ctx, "api.example.com", "", strings.Repeat("n", api.MaxNoteLen+1))
					return err
				}},
			} {
				err := bad.call()
				apitest.CheckInvalid(t, "bad "+bad.field, err)
				if ie, _ := errors.AsType[*api.InvalidError](err); ie == nil || ie.Field != bad.field {
					t.Errorf("bad %s: %v; want the field named", bad.field, err)
				}
			}
			if after, _ := c.HostPolicies(ctx); !reflect.DeepEqual(after, before) {
				t.Errorf("refused calls changed the policies:\n got  %+v\n want %+v", after, before)
			}

			if err := c.UnsetHost(ctx, "api.example.com"); err != nil {
				t.Fatalf("UnsetHost: %v", err)
			}
			if err := c.UnsetHost(ctx, "api.example.com"); !errors.Is(err, api.ErrNotFound) {
				t.Errorf("UnsetHost twice = %v; want ErrNotFound", err)
			}
		})
	}
}

// Hosts lists every host with a policy or waiting jobs, with its
// pending, unknown and due counts; the same through the admin API, and
// on a store that cannot count per host itself (counted from List).
func TestHosts(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := context.Background()
	c := pgClient(t, now)
	for i, u := range []string{"http://a.example.com/x", "http://a.example.com/y", "http://b.example.com:8080/x"} {
		o := api.EnqueueOptions{Deadline: 24 * time.Hour}
		if i == 1 {
			o.RunAt = now.Add(time.Hour)
		}
		if _, err := c.Enqueue(ctx, api.Request{URL: u, Body: []byte("b")}, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PauseHost(ctx, "c.example.com", "", "not yet"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetHost(ctx, "a.example.com", api.HostSettings{Rate: ptr(2.0)}, ""); err != nil {
		t.Fatal(err)
	}
	want := []api.HostStatus{
		{Host: "a.example.com", Pending: 2, Due: 1},
		{Host: "b.example.com:8080", Pending: 1, Due: 1},
		{Host: "c.example.com"},
	}
	check := func(via string, c *api.Client) {
		t.Helper()
		got, err := c.Hosts(ctx)
		if err != nil {
			t.Fatalf("Hosts %s: %v", via, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Hosts %s = %+v; want %+v", via, got, want)
		}
		for i := range got {
			g, w := got[i], want[i]
			hasPolicy := g.Host != "b.example.com:8080"
			if g.Host != w.Host || g.Pending != w.Pending || g.Unknown != w.Unknown || g.Due != w.Due || g.Partial || (g.Policy != nil) != hasPolicy {
				t.Errorf("Hosts %s [%d] = %+v (policy %+v); want %+v, a policy: %v", via, i, g, g.Policy, w, hasPolicy)
			}
		}
		if p := got[0].Policy; p == nil || p.Rate != 2 {
			t.Errorf("Hosts %s: a.example.com's policy %+v; want rate 2", via, p)
		}
		if p := got[2].Policy; p == nil || !p.Paused || p.Note != "not yet" {
			t.Errorf("Hosts %s: c.example.com's policy %+v; want paused, not yet", via, p)
		}
	}
	check("on the store", c)
	check("through the admin API", throughAdmin(t, c))
	// A store that cannot count per host is counted from its jobs.
	st := c.Store()
	uncounted, err := api.New(struct{ store.Store }{st}, &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	check("counted from List", uncounted)
}
