package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
)

// post sends one create straight to the target, as a misbehaving runner would.
func post(t *testing.T, target *faketarget.Server, key, body string, timeout time.Duration) {
	t.Helper()
	req, _ := http.NewRequest("POST", target.URL()+"/payments", bytes.NewReader([]byte(body)))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
}

// verdictSetup is a database path and a fake target (closed at the end).
func verdictSetup(t *testing.T) (string, *faketarget.Server) {
	t.Helper()
	target, err := faketarget.Start(faketarget.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	return filepath.Join(t.TempDir(), "demo.db"), target
}

// TestVerifyCatchesDuplicateUnderRotatedKey: the job succeeded under key K,
// and a second payment with the same body was created under "K-r2" (a key
// rotated on retry). Two payments for one job: the verdict must not pass.
func TestVerifyCatchesDuplicateUnderRotatedKey(t *testing.T) {
	bin := buildBinary(t)
	dbPath, target := verdictSetup(t)
	keys := []string{"demo-t-00000"}
	ctx := context.Background()
	if err := enqueueWave(ctx, dbPath, target, keys, 0); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Binary: bin, Workers: 2}
	cfg.defaults()
	if _, err := runOnce(ctx, cfg, dbPath, true, rand.New(rand.NewPCG(1, 2)), &progress{out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	// The duplicate a key-rotating runner would have sent: same body, new key.
	post(t, target, keys[0]+"-r2", `{"amount":100,"currency":"EUR","ref":"demo-t-00000"}`, 5*time.Second)

	sum := &Summary{Jobs: 1}
	if err := verify(dbPath, target, keys, sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("by_state=%v creates=%d dups=%v violations=%v", sum.ByState, sum.Creates, sum.Duplicates, sum.Violations)
	if sum.OK() {
		t.Errorf("verdict PASS although the target holds %d payments for 1 job", sum.Creates)
	}
}

// runJobs enqueues one job per key at url and runs a runner until idle.
func runJobs(t *testing.T, dbPath, url string, keys []string) {
	t.Helper()
	c, err := api.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if _, err := c.Enqueue(context.Background(), api.Request{Method: "POST", URL: url, Body: []byte(fmt.Sprintf(`{"amount":%d}`, 100+i))},
			api.EnqueueOptions{Key: k, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	cfg := Config{Binary: buildBinary(t), Workers: 2}
	cfg.defaults()
	if _, err := runOnce(context.Background(), cfg, dbPath, true, rand.New(rand.NewPCG(1, 2)), &progress{out: io.Discard}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyWaitsForInFlightCreates: the job ended failed (404, permanent)
// while a create with its key is still committing at the target (a runner
// that took a timeout for "nothing happened" leaves exactly this). verify
// must settle the commit first: in reality it lands, so the verdict fails.
func TestVerifyWaitsForInFlightCreates(t *testing.T) {
	dbPath, target := verdictSetup(t)
	key := "demo-t-00000"
	runJobs(t, dbPath, target.URL()+"/nope", []string{key}) // 404: failed
	target.SetFaults(faketarget.Faults{SlowCommit: 1, SlowCommitDelay: 300 * time.Millisecond})
	post(t, target, key, `{"amount":100}`, 50*time.Millisecond) // client gives up; commit goes on
	sum := &Summary{Jobs: 1}
	if err := verify(dbPath, target, []string{key}, sum); err != nil {
		t.Fatal(err)
	}
	target.CommitInFlight() // what happens in reality, verdict or not
	t.Logf("by_state=%v OK=%v; creates seen by verify=%d; creates now=%d", sum.ByState, sum.OK(), sum.Creates, target.Creates(key))
	if sum.OK() && target.Creates(key) > 0 {
		t.Errorf("verdict PASS for a failed job the target holds %d payment(s) for", target.Creates(key))
	}
}

// TestVerifyChecksCanceled: canceled claims no attempt could have had an
// effect (P6); a payment for a canceled job is a false end state.
func TestVerifyChecksCanceled(t *testing.T) {
	dbPath, target := verdictSetup(t)
	key := "demo-t-00000"
	c, err := api.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), api.Request{Method: "POST", URL: target.URL() + "/payments", Body: []byte(`{"amount":100}`)},
		api.EnqueueOptions{Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(context.Background(), key, "review", "test"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	post(t, target, key, `{"amount":100}`, 5*time.Second)
	sum := &Summary{Jobs: 1}
	if err := verify(dbPath, target, []string{key}, sum); err != nil {
		t.Fatal(err)
	}
	if sum.OK() {
		t.Errorf("verdict PASS for a canceled job the target holds %d payment(s) for", target.Creates(key))
	}
}

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
