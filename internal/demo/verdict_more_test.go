package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
)

// A create that is still in the target's handler (Latency pause, before the
// commit point) when verify runs is waited for (Settle) and counted, not
// left to land after the verdict.
func TestVerifyCountsCreateStillInHandler(t *testing.T) {
	dbPath, target := verdictSetup(t)
	key := "demo-t-00000"
	runJobs(t, dbPath, target.URL()+"/nope", []string{key}) // 404: failed
	target.SetFaults(faketarget.Faults{Latency: 300 * time.Millisecond})
	post(t, target, key, `{"amount":100}`, 50*time.Millisecond) // client gives up during the latency pause
	sum := &Summary{Jobs: 1}
	if err := verify(dbPath, target, []string{key}, sum); err != nil {
		t.Fatal(err)
	}
	// The create lands, whenever verify returned: wait for it, not a time.
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := target.WaitCreates(wctx, key, 1); err != nil {
		t.Fatalf("the slow create never landed: %v", err)
	}
	t.Logf("by_state=%v OK=%v creates seen by verify=%d creates now=%d", sum.ByState, sum.OK(), sum.Creates, target.Creates(key))
	if sum.OK() && target.Creates(key) > 0 {
		t.Errorf("verdict PASS for a failed job the target holds %d payment(s) for", target.Creates(key))
	}
}

// The store holds bodies different from those the demo enqueued (here two
// jobs' bodies swapped, as a batching bug in EnqueueMany would do). The
// runner sends what the store holds; verify compares against what was
// enqueued, not against the store, so it fails the run.
func TestVerifyCatchesSwappedBodies(t *testing.T) {
	dbPath, target := verdictSetup(t)
	keys := []string{"demo-t-00000", "demo-t-00001"}
	want := func(i int) string { return fmt.Sprintf(`{"amount":%d,"currency":"EUR","ref":%q}`, 100+i, keys[i]) }
	c, err := api.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		body := want(1 - i) // swapped
		if _, err := c.Enqueue(context.Background(), api.Request{Method: "POST", URL: target.URL() + "/payments",
			Header: []api.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(body)},
			api.EnqueueOptions{Key: k, StatusURL: target.StatusTemplate()}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	cfg := Config{Binary: buildBinary(t), Workers: 2}
	cfg.defaults()
	if _, err := runOnce(context.Background(), cfg, dbPath, true, rand.New(rand.NewPCG(1, 2)), &progress{out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	sum := &Summary{Jobs: 2}
	if err := verify(dbPath, target, keys, sum); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		t.Logf("%s received %q", k, target.BodiesByKey(k))
	}
	t.Logf("by_state=%v OK=%v violations=%v", sum.ByState, sum.OK(), sum.Violations)
	if sum.OK() {
		t.Errorf("verdict PASS although each key's payment carries the other job's enqueued body")
	}
}

// A misbehaving runner sends a succeeded job's create again, same key and
// body: must be flagged.
func TestVerifyCatchesResend(t *testing.T) {
	dbPath, target := verdictSetup(t)
	keys := []string{"demo-t-00000"}
	if err := enqueueWave(context.Background(), dbPath, target, keys, 0); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Binary: buildBinary(t), Workers: 2}
	cfg.defaults()
	if _, err := runOnce(context.Background(), cfg, dbPath, true, rand.New(rand.NewPCG(1, 2)), &progress{out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	post(t, target, keys[0], `{"amount":100,"currency":"EUR","ref":"demo-t-00000"}`, 5*time.Second)
	sum := &Summary{Jobs: 1}
	if err := verify(dbPath, target, keys, sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("dups=%v", sum.Duplicates)
	if sum.OK() {
		t.Errorf("resend not flagged")
	}
}
