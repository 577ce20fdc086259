package bolt_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/storetest"
)

// Batches that fail at page allocation (MaxSize), or are refused by the
// commit hook, or hold a caller panic, are not misread as visible failures.
func TestNormalFailuresDoNotFailStore(t *testing.T) {
	n := 0
	var mu sync.Mutex
	hook := func(ops int) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		if ops > 1 && n%2 == 0 {
			return errors.New("refused")
		}
		return nil
	}
	db, _ := newDB(t, &bolt.Options{MaxSize: 1 << 20, CommitLinger: 5 * time.Millisecond, CommitHook: hook})
	now := storetest.T0()
	var wg sync.WaitGroup
	var failed, full, ok, other int
	var emu sync.Mutex
	for round := range 40 {
		for i := range 16 {
			wg.Go(func() {
				j := storetest.NewJob(fmt.Sprintf("r%d-%d", round, i), now)
				j.Request.Body = []byte(strings.Repeat("x", 3000))
				_, err := db.Enqueue(ctx, j)
				emu.Lock()
				defer emu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, store.ErrFailed):
					failed++
					t.Logf("ErrFailed: %v", err)
				case strings.Contains(err.Error(), "maximum") || strings.Contains(err.Error(), "max"):
					full++
				default:
					other++
				}
			})
		}
		wg.Wait()
	}
	t.Logf("ok %d, full %d, other %d, ErrFailed %d", ok, full, other, failed)
	if failed > 0 {
		t.Errorf("%d writes got ErrFailed from normal failures", failed)
	}
}
