package bolt_test

import (
	"strings"
	"testing"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/storetest"
)

// Seed follows Enqueue's rules: a key or an id used twice in one call, or
// already stored, is refused and nothing is written.
func TestSeedRefusesUsedKeysAndIDs(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	ended := func(key string) *store.Job {
		j := storetest.NewJob(key, now)
		j.State = store.StateSucceeded
		return j
	}
	live := storetest.NewJob("live", now)
	if _, err := db.Enqueue(ctx, live); err != nil {
		t.Fatal(err)
	}
	sameID := ended("seeded")
	sameID.ID = live.ID
	twinA, twinB := ended("twin"), ended("twin")
	idA, idB := ended("id-a"), ended("id-b")
	idB.ID = idA.ID
	for _, c := range []struct {
		name string
		jobs []*store.Job
		want string
	}{
		{"key twice in one call", []*store.Job{twinA, twinB}, `key "twin" already used`},
		{"key already stored", []*store.Job{ended("live")}, `key "live" already used`},
		{"id of a stored job", []*store.Job{sameID}, "already used"},
		{"id twice in one call", []*store.Job{idA, idB}, "already used"},
	} {
		before, _ := db.Stats()
		err := db.Seed(ctx, c.jobs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Seed = %v, want an error containing %q", c.name, err, c.want)
		}
		if after, _ := db.Stats(); after[store.StateSucceeded] != before[store.StateSucceeded] {
			t.Errorf("%s: refused Seed changed the counts: %v → %v", c.name, before, after)
		}
	}
	got, err := db.Get(live.ID)
	if err != nil || got.State != store.StatePending || got.Key != "live" {
		t.Errorf("stored job after refused seeds: %+v, %v; want it pending under key live", got, err)
	}
	rep, err := db.Check()
	if err != nil || len(rep.Problems) > 0 {
		t.Errorf("Check after refused seeds: %v, %v", rep.Problems, err)
	}
}

// A finish or a transition that changes what a job sends is refused (P2):
// the request, the fingerprint and the key format are fixed at enqueue.
func TestWritesKeepTheRequest(t *testing.T) {
	db, _ := newDB(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("fixed-request", now)
	if _, err := db.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	claims, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(1), Limit: 1})
	if err != nil || len(claims) != 1 {
		t.Fatalf("ClaimDue = %d claims, %v", len(claims), err)
	}
	for name, change := range map[string]func(j *store.Job){
		"body": func(j *store.Job) { j.Request.Body = append(j.Request.Body, 'x') },
		"url":  func(j *store.Job) { j.Request.URL += "?again" },
		"header": func(j *store.Job) {
			j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "X-New", Value: "1"})
		},
		"method":      func(j *store.Job) { j.Request.Method = "PUT" },
		"fingerprint": func(j *store.Job) { j.Fingerprint = "sha256:0" },
		"key format":  func(j *store.Job) { j.KeyFormat = "structured-other" },
	} {
		_, _, err := db.FinishClaim(ctx, claims[0], func(j *store.Job) error {
			change(j)
			j.State = store.StateSucceeded
			return nil
		}, nil)
		if err == nil || !strings.Contains(err.Error(), "never change") {
			t.Errorf("finish changing the %s: err %v, want a refusal", name, err)
		}
		if _, err := db.Finish(ctx, j.ID, claims[0].Fence, func(j *store.Job) error { change(j); return nil }); err == nil {
			t.Errorf("transition changing the %s: no error", name)
		}
	}
	got, err := db.Get(j.ID)
	if err != nil || got.State != store.StateRunning || string(got.Request.Body) != string(j.Request.Body) || got.Request.URL != j.Request.URL {
		t.Errorf("job after refused writes: %v %q %s, %v; want running with its request unchanged", got.State, got.Request.Body, got.Request.URL, err)
	}
}
