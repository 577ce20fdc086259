package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

func revOpen(t *testing.T) *api.Client {
	t.Helper()
	c, err := api.Open(filepath.Join(t.TempDir(), "r.db"), &api.Options{Store: &bolt.Options{CommitLinger: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func revEnq(t *testing.T, c *api.Client, runAt time.Time) *api.Job {
	t.Helper()
	r, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:1/x", Body: []byte("b")}, api.EnqueueOptions{RunAt: runAt, Deadline: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return r.Job
}

// README: "`next` absent on the last page"; store.ListPage.Next: "empty on the last one".
func TestListNoNextAfterExactlyFullFilteredPage(t *testing.T) {
	c := revOpen(t)
	for range 3 {
		revEnq(t, c, time.Time{})
	}
	ctx := context.Background()
	un, _ := c.List(ctx, api.ListFilter{Limit: 3})
	if un.Next != "" {
		t.Errorf("unfiltered: Next=%q on a page holding every job", un.Next)
	}
	p, err := c.List(ctx, api.ListFilter{States: []api.State{store.StatePending}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if p.Next != "" {
		p2, _ := c.List(ctx, api.ListFilter{States: []api.State{store.StatePending}, Limit: 3, Cursor: p.Next})
		t.Errorf("--state pending --limit 3 with 3 jobs: Next=%q although the following page has %d jobs (unfiltered list: Next empty)", p.Next, len(p2.Jobs))
	}
}

// Paging with jobs being added, changing state and swept concurrently:
// every job unchanged throughout must be seen exactly once.
func TestListConcurrentPaging(t *testing.T) {
	var off atomic.Int64
	c, err := api.Open(filepath.Join(t.TempDir(), "r.db"), &api.Options{Store: &bolt.Options{CommitLinger: -1}, Now: func() time.Time { return time.Now().Add(time.Duration(off.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	far := time.Now().Add(time.Hour)
	stable := map[string]bool{}
	var churn []*api.Job
	for i := range 600 {
		// runAt spread so the pending index has distinct times
		j := revEnq(t, c, far.Add(time.Duration(rand.IntN(1000))*time.Millisecond))
		if i%3 == 0 {
			churn = append(churn, j)
		} else {
			stable[j.ID] = true
		}
	}
	// pre-cancel some stable ones so 'canceled' state has unchanged members too
	stableCanceled := map[string]bool{}
	n := 0
	off.Store(int64(10 * time.Hour)) // stable canceled jobs look updated in the future: Sweep(0) never takes them
	for id := range stable {
		if n == 60 {
			break
		}
		if _, err := c.Cancel(ctx, id, "t", ""); err != nil {
			t.Fatal(err)
		}
		stableCanceled[id] = true
		n++
	}
	off.Store(0)
	var swept atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // churn: add, cancel churn jobs, sweep canceled (only churned ones are old enough? sweep all canceled older than 0 would delete stable canceled too)
		defer wg.Done()
		i := 0
		for !stop.Load() {
			revEnq(t, c, far.Add(time.Duration(rand.IntN(1000))*time.Millisecond))
			revEnq(t, c, time.Time{})
			if i < len(churn) {
				c.Cancel(ctx, churn[i].ID, "t", "")
				i++
			}
			if i%5 == 0 {
				n, _ := c.Sweep(ctx, 0, 0)
				swept.Add(int64(n))
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	type cfg struct {
		states []api.State
		oldest bool
	}
	cfgs := []cfg{{nil, false}, {[]api.State{store.StatePending}, false}, {[]api.State{store.StatePending}, true},
		{[]api.State{store.StateCanceled, store.StatePending}, false}, {[]api.State{store.StatePending, store.StateCanceled}, true}}
	for _, cf := range cfgs {
		for _, limit := range []int{1, 7, 50} {
			seen := map[string]int{}
			cur := ""
			for pages := 0; pages < 5000; pages++ {
				p, err := c.List(ctx, api.ListFilter{States: cf.states, Oldest: cf.oldest, Limit: limit, Cursor: cur})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range p.Jobs {
					seen[j.ID]++
				}
				if p.Next == "" {
					break
				}
				cur = p.Next
			}
			wantPending := len(cf.states) == 0 || cf.states[0] == store.StatePending || len(cf.states) == 2
			wantCanceled := len(cf.states) == 0 || len(cf.states) == 2
			for id := range stable {
				want := (stableCanceled[id] && wantCanceled) || (!stableCanceled[id] && wantPending)
				if want && seen[id] != 1 {
					t.Errorf("%v oldest=%v limit=%d: stable job %s seen %d times", cf.states, cf.oldest, limit, id, seen[id])
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	fmt.Println("swept", swept.Load())
}
