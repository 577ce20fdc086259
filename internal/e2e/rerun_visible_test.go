package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// The batch is refused by the commit hook (nothing written); re-run one by
// one, the first operation's meta fsync fails: the store fails then,
// acknowledging nothing that a remount loses.
func TestRerunVisibleFailureFailsTheStore(t *testing.T) {
	r := newFsyncRig(t)
	path := filepath.Join(r.mnt, "f.db")
	ctx := context.Background()
	var armed, refused atomic.Bool
	hook := func(ops int) error {
		if armed.Load() && ops > 1 && refused.CompareAndSwap(false, true) {
			return errors.New("refused once")
		}
		return nil
	}
	c := openAt(t, path, api.Options{Store: &bolt.Options{CommitLinger: 50 * time.Millisecond, CommitHook: hook}})
	r.storeThenFailNextMeta(c, path)
	armed.Store(true)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			_, errs[i] = c.Enqueue(ctx, api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte("x")}, api.EnqueueOptions{Key: fmt.Sprintf("x-%d", i)})
		})
	}
	wg.Wait()
	t.Logf("refused batch: %v; results: %v", refused.Load(), errs)
	c.Close()
	r.remount()
	c2 := openAt(t, path, api.Options{})
	defer c2.Close()
	for i, e := range errs {
		k := fmt.Sprintf("x-%d", i)
		_, gerr := c2.Get(ctx, k)
		t.Logf("%s: enqueue err=%v; after remount: %v", k, e != nil, gerr)
		if e == nil && errors.Is(gerr, store.ErrNotFound) {
			t.Errorf("%s acknowledged and lost", k)
		}
	}
}
