package runner

import (
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
)

// The settle window of a job: its host's own policy's, else the default
// policy's, else Config.Settle (DefaultSettle unless set); none for a job
// whose replays are safe unless a policy sets one, and none at all with
// a negative Config.Settle.
func TestSettleAt(t *testing.T) {
	now := time.Unix(1000, 0)
	start := now.Add(-time.Second)
	job := func(mods ...func(j *store.Job)) *store.Job {
		j := &store.Job{State: store.StateUnknown, Request: store.Request{Method: "POST", URL: "http://a.example/pay"},
			StatusURL: "http://status.example/{key}",
			History:   []store.Event{{Kind: store.EventAttempt, N: 1, Start: start, End: now}}}
		for _, m := range mods {
			m(j)
		}
		return j
	}
	for _, tc := range []struct {
		name     string
		policies []store.HostPolicy
		settle   time.Duration // Config.Settle
		job      *store.Job
		want     time.Duration // after the attempt's start; 0 for none
	}{
		{"the default", nil, 0, job(), DefaultSettle},
		{"Config.Settle", nil, 5 * time.Second, job(), 5 * time.Second},
		{"none", nil, -1, job(), 0},
		{"the default policy's", []store.HostPolicy{{Host: store.DefaultHost, Settle: 8 * time.Second}}, 0, job(), 8 * time.Second},
		{"a policy without one falls to the default policy's",
			[]store.HostPolicy{{Host: "a.example", Rate: 10}, {Host: store.DefaultHost, Settle: 8 * time.Second}}, 0, job(), 8 * time.Second},
		{"the host's own", []store.HostPolicy{{Host: "a.example", Settle: 3 * time.Second}, {Host: store.DefaultHost, Settle: 8 * time.Second}}, 0,
			job(func(j *store.Job) { j.StatusURL = "http://a.example/status/{key}" }), 3 * time.Second},
		{"the status host's when longer", []store.HostPolicy{{Host: "a.example", Settle: 3 * time.Second}, {Host: "status.example", Settle: 9 * time.Second}}, 0, job(), 9 * time.Second},
		{"a key TTL needs none", nil, 0, job(func(j *store.Job) { j.KeyTTL = time.Hour }), 0},
		{"a replay-safe job needs none", nil, 0, job(func(j *store.Job) { j.ReplaySafe = true }), 0},
		{"a policy's applies to a key TTL job too", []store.HostPolicy{{Host: "a.example", Settle: 3 * time.Second}}, 0,
			job(func(j *store.Job) { j.KeyTTL = time.Hour }), 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Workers: 4, Settle: tc.settle}
			cfg.setDefaults()
			n := now
			r := &Runner{cfg: cfg, traffic: testTraffic(&n, tc.policies...)}
			r.traffic.refresh(now)
			got := r.settleAt(tc.job)
			switch {
			case tc.want == 0 && !got.IsZero():
				t.Errorf("settleAt = %s after the start, want no window", got.Sub(start))
			case tc.want > 0 && !got.Equal(start.Add(tc.want)):
				t.Errorf("settleAt = %v, want %s after the start", got, tc.want)
			}
		})
	}
}
