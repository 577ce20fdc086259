package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// hostsOf returns s's host policies.
func hostsOf(t *testing.T, s Store) store.Hosts {
	t.Helper()
	return s
}

// hostPolicies returns every policy, failing the test on an error.
func hostPolicies(t *testing.T, h store.Hosts) []store.HostPolicy {
	t.Helper()
	ps, err := h.HostPolicies()
	if err != nil {
		t.Fatalf("HostPolicies: %v", err)
	}
	return ps
}

// samePolicy compares policies by value, UpdatedAt by instant.
func samePolicy(a, b store.HostPolicy) bool {
	a.UpdatedAt, b.UpdatedAt = a.UpdatedAt.UTC().Round(0), b.UpdatedAt.UTC().Round(0)
	return reflect.DeepEqual(a, b)
}

// testHostPolicies: UpdateHostPolicy creates, changes and returns a
// policy in one transaction (fn sees the zero policy of the host, exists
// false, when it has none; an error from fn, or a change of Host, stores
// nothing); HostPolicies lists every policy by host in byte order;
// UnsetHostPolicy deletes one, ErrNotFound when there is none.
func testHostPolicies(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	h := hostsOf(t, s)
	now := T0()
	if ps := hostPolicies(t, h); len(ps) != 0 {
		t.Errorf("HostPolicies of a new store = %v; want none", ps)
	}
	if err := h.UnsetHostPolicy(ctx, "api.example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UnsetHostPolicy of a host without a policy = %v; want ErrNotFound", err)
	}

	set := func(host string, change func(p *store.HostPolicy)) store.HostPolicy {
		t.Helper()
		var before store.HostPolicy
		var had bool
		for _, p := range hostPolicies(t, h) {
			if p.Host == host {
				before, had = p, true
			}
		}
		got, err := h.UpdateHostPolicy(ctx, host, func(p *store.HostPolicy, exists bool) error {
			if exists != had || (had && !samePolicy(*p, before)) || (!had && !samePolicy(*p, store.HostPolicy{Host: host})) {
				t.Errorf("UpdateHostPolicy(%s) gave fn %+v, exists %v; want %+v, exists %v", host, *p, exists, before, had)
			}
			change(p)
			return nil
		})
		if err != nil {
			t.Fatalf("UpdateHostPolicy(%s): %v", host, err)
		}
		return got
	}
	limits := func(rate float64, burst, conc int) func(p *store.HostPolicy) {
		return func(p *store.HostPolicy) {
			p.Rate, p.Burst, p.Concurrency = rate, burst, conc
			p.UpdatedAt, p.UpdatedBy = now, "storetest"
		}
	}
	b := set("b.example.com", limits(40, 5, 0))
	if want := (store.HostPolicy{Host: "b.example.com", Rate: 40, Burst: 5, UpdatedAt: now, UpdatedBy: "storetest"}); !samePolicy(b, want) {
		t.Errorf("UpdateHostPolicy returned %+v; want %+v", b, want)
	}
	b = set("b.example.com", func(p *store.HostPolicy) {
		p.Concurrency, p.Settle = 3, 6*time.Second
		p.Paused, p.Note = true, "storetest: paused"
		p.UpdatedAt = now.Add(time.Minute)
	})
	if want := (store.HostPolicy{Host: "b.example.com", Rate: 40, Burst: 5, Concurrency: 3, Settle: 6 * time.Second, Paused: true,
		Note: "storetest: paused", UpdatedAt: now.Add(time.Minute), UpdatedBy: "storetest"}); !samePolicy(b, want) {
		t.Errorf("the second update returned %+v; want %+v", b, want)
	}

	// Byte order, whatever a database's collation would say: "*" first,
	// "-" before ".", a host before itself with a port.
	hosts := []string{"a.example.com:8080", "*", "a-b.example.com", "[::1]:9000", "a.example.com", "B"}
	for i, host := range hosts {
		set(host, limits(float64(i+1), 0, i))
	}
	var got []string
	for _, p := range hostPolicies(t, h) {
		got = append(got, p.Host)
		if p.Host == b.Host && !samePolicy(p, b) {
			t.Errorf("HostPolicies holds %+v; want %+v", p, b)
		}
	}
	want := append(slices.Clone(hosts), b.Host)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("HostPolicies lists %q; want %q (byte order)", got, want)
	}

	// Refusals store nothing: an error from fn, a change of Host; for a
	// host with a policy and one without.
	errMine := errors.New("storetest: refused")
	for _, host := range []string{b.Host, "new.example.com"} {
		if _, err := h.UpdateHostPolicy(ctx, host, func(p *store.HostPolicy, _ bool) error { p.Rate = 1; return errMine }); !errors.Is(err, errMine) {
			t.Errorf("UpdateHostPolicy(%s) with fn's error = %v; want that error", host, err)
		}
		if _, err := h.UpdateHostPolicy(ctx, host, func(p *store.HostPolicy, _ bool) error { p.Host = "other.example.com"; return nil }); err == nil {
			t.Errorf("UpdateHostPolicy(%s) that changes Host: no error", host)
		}
	}
	after := hostPolicies(t, h)
	if len(after) != len(want) {
		t.Errorf("after refused updates HostPolicies lists %d policies; want %d", len(after), len(want))
	}
	for _, p := range after {
		if p.Host == b.Host && !samePolicy(p, b) {
			t.Errorf("a refused update changed %s: %+v; want %+v", b.Host, p, b)
		}
	}

	if err := h.UnsetHostPolicy(ctx, b.Host); err != nil {
		t.Fatalf("UnsetHostPolicy(%s): %v", b.Host, err)
	}
	if err := h.UnsetHostPolicy(ctx, b.Host); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UnsetHostPolicy twice = %v; want ErrNotFound", err)
	}
	for _, p := range hostPolicies(t, h) {
		if p.Host == b.Host {
			t.Errorf("HostPolicies after UnsetHostPolicy still holds %+v", p)
		}
	}
	// A policy set again after an unset starts from the zero policy.
	set(b.Host, limits(2, 0, 0))
}

// testHostPolicyConcurrent: concurrent updates of one host take turns,
// so none is lost, and one of them alone sees no policy.
func testHostPolicyConcurrent(t *testing.T, open func(t *testing.T) Store) {
	const (
		workers = 8
		rounds  = 10
	)
	s := open(t)
	h := hostsOf(t, s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range rounds {
				_, err := h.UpdateHostPolicy(ctx, "c.example.com", func(p *store.HostPolicy, exists bool) error {
					if !exists {
						mu.Lock()
						created++
						mu.Unlock()
					}
					p.Burst++
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("UpdateHostPolicy: %v", err)
	}
	ps := hostPolicies(t, h)
	if len(ps) != 1 || ps[0].Burst != workers*rounds {
		t.Errorf("after %d concurrent increments HostPolicies = %+v; want one policy with Burst %d", workers*rounds, ps, workers*rounds)
	}
	// fn may run again when a transaction is retried, so a backend may
	// call it more than once with exists false; but the stored count
	// shows exactly one creation took effect.
	if created < 1 {
		t.Errorf("no update saw the host without a policy")
	}
}

// jobTo is NewJob sending to url.
func jobTo(key, url string, now time.Time) *store.Job {
	j := NewJob(key, now)
	j.Request.URL = url
	return j
}

// hostURL is a target URL on host.
func hostURL(host string) string { return fmt.Sprintf("http://%s/x", host) }
