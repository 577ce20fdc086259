package bolt_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
)

// testdata/format1.db was written by the version before leases (job
// records in binary format 1, no owners): three jobs enqueued, one
// canceled, and a runner killed with SIGKILL while its attempt of hang-1
// was in flight. It opens, checks clean and works unchanged: the running
// job has no owner, so no lease is alive for it and a rescue moves it to
// unknown with a new fence, its status query first.
func TestOpensFormat1File(t *testing.T) {
	b, err := os.ReadFile("testdata/format1.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "idemrun.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db := openAt(t, path, nil)
	if rep, err := db.Check(); err != nil || !rep.OK() || rep.Jobs != 3 {
		t.Fatalf("Check = %+v, %v; want 3 jobs, no problems", rep, err)
	}
	st, err := db.Stats()
	if err != nil || st[store.StatePending] != 1 || st[store.StateRunning] != 1 || st[store.StateCanceled] != 1 {
		t.Fatalf("Stats = %v, %v; want pending 1, running 1, canceled 1", st, err)
	}
	hang, err := db.GetByKey("hang-1")
	if err != nil || hang.State != store.StateRunning || hang.Owner != "" || hang.Attempts != 1 {
		t.Fatalf("hang-1 = %+v, %v; want running, attempt 1, no owner", hang, err)
	}
	now := time.Now()
	if err := db.Register(ctx, store.RunnerInfo{ID: "new-runner", Workers: 1}, now, 1000*time.Hour); err != nil {
		t.Fatal(err)
	}
	n, err := db.Rescue(ctx, now, nil)
	if err != nil || n != 1 {
		t.Fatalf("Rescue = %d, %v; want 1", n, err)
	}
	got, _ := db.GetByKey("hang-1")
	if got.State != store.StateUnknown || got.Fence != hang.Fence+1 || !got.MayHaveEffect {
		t.Errorf("hang-1 after rescue: %s, fence %d, may have effect %v; want unknown, fence %d, true", got.State, got.Fence, got.MayHaveEffect, hang.Fence+1)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(800 * time.Hour), Limit: 5, Owner: "new-runner"})
	if err != nil || len(cs) != 1 || cs[0].Job.Key != "later-1" || cs[0].Owner != "new-runner" {
		t.Fatalf("ClaimDue = %+v, %v; want later-1 owned by new-runner", cs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, &bolt.Options{ReadOnly: true})
	if j, err := db.GetByKey("later-1"); err != nil || j.Owner != "new-runner" || j.State != store.StateRunning {
		t.Errorf("later-1 reopened = %+v, %v; want running, owner new-runner", j, err)
	}
}
