package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/store"
)

// claimAs claims the job under key for the runner owner, as that runner
// would before its attempt.
func claimAs(t *testing.T, c *api.Client, key, owner string) {
	t.Helper()
	claims, err := c.Store().ClaimDue(context.Background(), store.ClaimRequest{State: store.StatePending, Now: time.Now().Add(time.Second), Limit: 1, Owner: owner})
	if err != nil || len(claims) != 1 || claims[0].Job.Key != key {
		t.Fatalf("claiming %s for %s: %d claims, %v", key, owner, len(claims), err)
	}
}

// A running job's view names its runner and says whether that runner's
// lease is alive, in Get and List alike, on the file and through the
// runner's socket; jobs in other states name no runner.
func TestRunningJobShowsItsLease(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)
	if err := c.Store().Register(ctx, store.RunnerInfo{ID: "live-runner", Workers: 1}, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Store().Deregister(ctx, "live-runner") })
	apitest.EnqueueOK(t, c, apitest.HostileURL, "lease-gone")
	claimAs(t, c, "lease-gone", "gone-runner")
	apitest.EnqueueOK(t, c, apitest.HostileURL, "lease-live")
	claimAs(t, c, "lease-live", "live-runner")
	apitest.EnqueueOK(t, c, apitest.HostileURL, "lease-pending")

	want := map[string][2]string{"lease-gone": {"gone-runner", api.LeaseExpired}, "lease-live": {"live-runner", api.LeaseAlive}, "lease-pending": {"", ""}}
	for name, cl := range map[string]*api.Client{"file": c, "socket": rem} {
		page, err := cl.List(ctx, api.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]*api.Job{}
		for _, j := range page.Jobs {
			listed[j.Key] = j
		}
		for key, w := range want {
			j, err := cl.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			for how, v := range map[string]*api.Job{"Get": j, "List": listed[key]} {
				if v == nil || v.Owner != w[0] || v.Lease != w[1] || v.RunnerGone() != (w[1] == api.LeaseExpired) {
					t.Errorf("%s %s %s: owner %q lease %q, want %q %q", name, how, key, v.Owner, v.Lease, w[0], w[1])
				}
			}
		}
	}
}
