package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
	"github.com/idemrun/idemrun/store/storetest"
)

// exec runs sql on the test server, {schema} standing for the quoted
// schema.
func exec(t *testing.T, url, schema, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sql = strings.ReplaceAll(sql, "{schema}", pgx.Identifier{schema}.Sanitize())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// schemaExists reports whether the server has the schema.
func schemaExists(t *testing.T, url, schema string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestOpenWithoutSchema: Open refuses a database without idemrun's
// tables and creates nothing; after Migrate it opens.
func TestOpenWithoutSchema(t *testing.T) {
	url, schema := pgtest.Schema(t)
	o := &postgres.Options{Schema: schema}
	db, err := postgres.Open(ctx, url, o)
	if !errors.Is(err, postgres.ErrNoSchema) || db != nil {
		t.Fatalf("Open before Migrate = %v, %v; want ErrNoSchema", db, err)
	}
	if !strings.Contains(err.Error(), schema) || strings.Contains(err.Error(), "idemrun run") {
		t.Errorf("Open's error %q; want it to name the schema, in the store's terms", err)
	}
	if schemaExists(t, url, schema) {
		t.Errorf("Open created schema %s", schema)
	}
	// A schema that exists without the tables is refused alike.
	exec(t, url, schema, `CREATE SCHEMA {schema}`)
	if _, err := postgres.Open(ctx, url, o); !errors.Is(err, postgres.ErrNoSchema) {
		t.Errorf("Open of an empty schema = %v; want ErrNoSchema", err)
	}
	if err := postgres.Migrate(ctx, url, o); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	openStore(t, url, o)
}

// TestMigrateConcurrent: processes migrating one schema at once take
// turns; each migration is applied once, and Migrate again does nothing.
func TestMigrateConcurrent(t *testing.T) {
	url, schema := pgtest.Schema(t)
	o := &postgres.Options{Schema: schema}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = postgres.Migrate(ctx, url, o) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	if err := postgres.Migrate(ctx, url, o); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, max int
	if err := conn.QueryRow(ctx, `SELECT count(*), max(version) FROM `+pgx.Identifier{schema, "idemrun_migrations"}.Sanitize()).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion || max != postgres.SchemaVersion {
		t.Errorf("%d migrations recorded, up to version %d; want each of the %d once", n, max, postgres.SchemaVersion)
	}
	openStore(t, url, o)
}

// TestNewerSchema: a schema migrated by a newer idemrun is refused by
// Open and left alone by Migrate.
func TestNewerSchema(t *testing.T) {
	_, url, schema := newStore(t, nil)
	exec(t, url, schema, `INSERT INTO {schema}.idemrun_migrations (version, name) VALUES ($1, 'from the future')`, postgres.SchemaVersion+1)
	o := &postgres.Options{Schema: schema}
	if _, err := postgres.Open(ctx, url, o); !errors.Is(err, postgres.ErrNewerSchema) {
		t.Errorf("Open of a newer schema = %v; want ErrNewerSchema", err)
	}
	if err := postgres.Migrate(ctx, url, o); !errors.Is(err, postgres.ErrNewerSchema) {
		t.Errorf("Migrate of a newer schema = %v; want ErrNewerSchema", err)
	}
	exec(t, url, schema, `DELETE FROM {schema}.idemrun_migrations WHERE version > $1`, postgres.SchemaVersion)
}

// TestPasswordNeverShown: no error of Open or Migrate, and no Location,
// shows the URL's password, whatever the URL's form.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	bad := map[string]string{
		"refused":          "postgres://idemrun:" + pw + "@127.0.0.1:1/db?connect_timeout=5",
		"refused escaped":  "postgres://idemrun:s3cr3t%2DPa55@127.0.0.1:1/db?connect_timeout=5",
		"param":            "postgres://idemrun@127.0.0.1:1/db?password=" + pw + "&connect_timeout=5",
		"keywords":         "host=127.0.0.1 port=1 user=idemrun password=" + pw + " connect_timeout=5",
		"keywords quoted":  "host=127.0.0.1 port=1 user=idemrun password='" + pw + " x' connect_timeout=5",
		"bad port":         "postgres://idemrun:" + pw + "@127.0.0.1:port/db",
		"bad escape":       "postgres://idemrun:" + pw + "%zz@127.0.0.1:1/db",
		"bad keyword":      "host=127.0.0.1 password=" + pw + " sslmode=nonsense",
		"slash in secret":  "postgres://idemrun:" + pw + "/x@127.0.0.1:1/db",
		"unknown param":    "postgres://idemrun:" + pw + "@127.0.0.1:1/db?pool_max_conns=many",
		"unclosed keyword": "host=127.0.0.1 password='" + pw,
	}
	for name, url := range bad {
		_, err := postgres.Open(ctx, url, nil)
		if err == nil {
			t.Errorf("%s: Open(%s) succeeded", name, url)
		} else if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: Open's error shows the password: %v", name, err)
		}
		err = postgres.Migrate(ctx, url, nil)
		if err == nil {
			t.Errorf("%s: Migrate(%s) succeeded", name, url)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: Migrate's error shows the password: %v", name, err)
		}
	}

	// The test server trusts every password; the one in the URL is still
	// not shown.
	_, url, schema := newStore(t, nil)
	withPW := strings.Replace(url, "postgres@", "postgres:"+pw+"@", 1)
	db := openStore(t, withPW, &postgres.Options{Schema: schema})
	if loc := db.Location(); strings.Contains(loc, pw) || !strings.Contains(loc, schema) {
		t.Errorf("Location = %q; want the URL without its password, and the schema", loc)
	}
}

// TestTwoHandles: runners on two handles of one database (two processes,
// as far as the store can tell) claim concurrently, by rounds and by
// chained claims, and never claim a job twice; their leases are the
// database's, so each handle sees both, and a rescue through one handle
// takes the jobs of a runner on the other once its lease expires.
func TestTwoHandles(t *testing.T) {
	const jobs, workers = 300, 4
	a, url, schema := newStore(t, &postgres.Options{MaxConns: 4})
	b := openStore(t, url, &postgres.Options{Schema: schema, MaxConns: 4})
	handles := []*postgres.DB{a, b}
	now := storetest.T0()
	var batch []*store.Job
	for i := range jobs {
		j := storetest.NewJob(fmt.Sprintf("two-%03d", i), now)
		j.NextRunAt = now.Add(-time.Duration(jobs-i) * time.Millisecond)
		batch = append(batch, j)
	}
	if _, err := a.EnqueueMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	owners := make([]string, 2*workers)
	for w := range owners {
		owners[w] = store.NewID()
		if err := handles[w%2].Register(ctx, store.RunnerInfo{ID: owners[w], Workers: 1}, now, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range handles {
		if ls, err := h.Leases(); err != nil || len(ls) != len(owners) {
			t.Fatalf("Leases = %d, %v; want the %d runners of both handles", len(ls), err, len(owners))
		}
	}

	claimed := make([][]string, len(owners))
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for w := range owners {
		wg.Go(func() {
			s, owner := handles[w%2], owners[w]
			for {
				cs, err := s.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1 + w%3, Owner: owner})
				if err != nil || len(cs) == 0 {
					errs[w] = err
					return
				}
				for _, c := range cs {
					// Every other job is finished with a chained claim,
					// the rest stay running for the rescue below.
					for cl := &c; cl != nil; {
						claimed[w] = append(claimed[w], cl.Job.ID)
						if len(claimed[w])%2 == 1 {
							break
						}
						if _, cl, err = s.FinishClaim(ctx, *cl, func(j *store.Job) error {
							j.State = store.StateSucceeded
							j.UpdatedAt = now
							return nil
						}, &store.NextClaim{Now: now, Owner: owner}); err != nil {
							errs[w] = err
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for w := range owners {
		if errs[w] != nil {
			t.Errorf("worker %d: %v", w, errs[w])
		}
		for _, id := range claimed[w] {
			seen[id]++
		}
	}
	for _, j := range batch {
		if seen[j.ID] != 1 {
			t.Errorf("job %s claimed %d times; want once", j.Key, seen[j.ID])
		}
	}
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st[store.StatePending] != 0 || st[store.StateRunning]+st[store.StateSucceeded] != jobs {
		t.Fatalf("Stats = %v; want every job running or succeeded", st)
	}

	// The runners of handle a stop heartbeating; b rescues their jobs.
	later := now.Add(30 * time.Minute)
	for w := 1; w < len(owners); w += 2 {
		if err := b.Heartbeat(ctx, owners[w], later, 2*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	running := map[string]bool{}
	all, err := a.List(store.ListFilter{States: []store.State{store.StateRunning}, Limit: jobs})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range all.Jobs {
		running[j.Owner] = true
	}
	n, err := b.Rescue(ctx, now.Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, _ = a.Stats()
	if st[store.StateUnknown] != int64(n) || n == 0 {
		t.Errorf("Rescue through b moved %d jobs, Stats %v; want the running jobs of a's runners unknown", n, st)
	}
	for w := 0; w < len(owners); w += 2 {
		if _, err := a.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now.Add(time.Hour), Limit: 1, Owner: owners[w]}); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("ClaimDue for a's expired runner %d = %v; want ErrLeaseLost", w, err)
		}
	}
	if ls, _ := a.Leases(); len(ls) != len(owners)/2 {
		t.Errorf("Leases after the rescue = %d; want b's %d", len(ls), len(owners)/2)
	}
}

// TestDamagedRows: Check reports a row whose columns disagree with its
// job and one that does not decode; claims pass over the damaged job and
// Get says what is wrong with it.
func TestDamagedRows(t *testing.T) {
	db, url, schema := newStore(t, nil)
	now := storetest.T0()
	var ids []string
	for i := range 4 {
		j := storetest.NewJob(fmt.Sprintf("d-%d", i), now)
		j.NextRunAt = now.Add(time.Duration(i-4) * time.Second)
		res, err := db.Enqueue(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	exec(t, url, schema, `UPDATE {schema}.jobs SET attempts = 7 WHERE id = $1`, ids[1])
	exec(t, url, schema, `UPDATE {schema}.jobs SET job = '{"id": "x", "from_the_future": 1}' WHERE id = $1`, ids[0])
	rep, err := db.Check()
	if err != nil || rep.Jobs != 4 || len(rep.Problems) != 2 {
		t.Fatalf("Check = %+v, %v; want 4 jobs and the 2 damaged rows", rep, err)
	}
	if !strings.Contains(rep.Problems[0]+rep.Problems[1], "attempts") {
		t.Errorf("Check problems %q; want the attempts column named", rep.Problems)
	}
	if _, err := db.Get(ids[0]); !errors.Is(err, postgres.ErrCorruptRecord) {
		t.Errorf("Get(damaged) = %v; want ErrCorruptRecord", err)
	}
	// The oldest due job does not decode: the claim takes the next two,
	// each once.
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 2})
	if err != nil || len(cs) != 2 || cs[0].Job.ID != ids[1] || cs[1].Job.ID != ids[2] {
		var got []string
		for _, c := range cs {
			got = append(got, c.Job.Key)
		}
		t.Errorf("ClaimDue(limit 2) = %v, %v; want d-1 and d-2, past the damaged d-0", got, err)
	}
	// The claim rewrote the row with the columns of its job.
	exec(t, url, schema, `DELETE FROM {schema}.jobs WHERE id = $1`, ids[0])
	if rep, err := db.Check(); err != nil || !rep.OK() {
		t.Errorf("Check after the damaged row went = %+v, %v; want none", rep, err)
	}
}

// TestTextRoundTrip: text beyond ASCII and control characters come back
// as stored, and the stored record is ASCII; a request that is not UTF-8
// is refused, not stored changed.
func TestTextRoundTrip(t *testing.T) {
	db, url, schema := newStore(t, nil)
	now := storetest.T0()
	j := storetest.NewJob("ключ-🔑", now)
	j.Request.Header = append(j.Request.Header, store.HeaderField{Name: "X-Note", Value: "naïve \u2028 日本 🔑"})
	j.Request.URL = "http://127.0.0.1:1/ü?q=€"
	res, err := db.Enqueue(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %v, %v", cs, err)
	}
	const odd = "nul \x00, escape \x1b, quote \" and \\ 🔑"
	got, _, err := db.FinishClaim(ctx, cs[0], func(j *store.Job) error {
		j.State = store.StateFailed
		j.LastError = odd
		j.Result = &store.Result{HTTPStatus: 400, Body: []byte{0, 0xff, 'x'}}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.GetByKey(j.Key)
	if err != nil || !storetest.JobsEqual(stored, got) || stored.LastError != odd {
		t.Errorf("GetByKey = %+v, %v; want %+v", stored, err, got)
	}
	if stored.Request.Header[len(stored.Request.Header)-1].Value != "naïve \u2028 日本 🔑" || stored.Request.URL != j.Request.URL {
		t.Errorf("stored request %+v; want %+v", stored.Request, j.Request)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var text string
	if err := conn.QueryRow(ctx, `SELECT job::text FROM `+pgx.Identifier{schema, "jobs"}.Sanitize()+` WHERE id = $1`, res.Job.ID).Scan(&text); err != nil {
		t.Fatal(err)
	}
	for i := range len(text) {
		if text[i] >= 0x80 {
			t.Fatalf("stored record has a byte beyond ASCII at %d: %q", i, text)
		}
	}

	bad := storetest.NewJob("bad-utf8", now)
	bad.Request.Header = append(bad.Request.Header, store.HeaderField{Name: "X-Bin", Value: "\xff\xfe"})
	if _, err := db.Enqueue(ctx, bad); err == nil || errors.Is(err, store.ErrKeyConflict) {
		t.Errorf("Enqueue of a header that is not UTF-8 = %v; want a refusal", err)
	}
}

// TestEnqueueManyCrossOrder: two batches of the same keys in opposite
// orders wait for each other's keys; the deadlock Postgres breaks is run
// again, and each key ends with one job.
func TestEnqueueManyCrossOrder(t *testing.T) {
	const n = 700 // three chunks
	db, _, _ := newStore(t, nil)
	now := storetest.T0()
	for round := range 3 {
		batches := make([][]*store.Job, 2)
		for i := range n {
			key := fmt.Sprintf("x-%d-%03d", round, i)
			batches[0] = append(batches[0], storetest.NewJob(key, now))
			batches[1] = append([]*store.Job{storetest.NewJob(key, now)}, batches[1]...)
		}
		results := make([][]store.EnqueueResult, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for b := range batches {
			wg.Go(func() { results[b], errs[b] = db.EnqueueMany(ctx, batches[b]) })
		}
		wg.Wait()
		ids := map[string]string{}
		for b := range batches {
			if errs[b] != nil {
				t.Fatalf("round %d, batch %d: %v", round, b, errs[b])
			}
			for i, r := range results[b] {
				if r.Err != nil || r.Job == nil {
					t.Fatalf("round %d, batch %d, job %d: %+v", round, b, i, r)
				}
				if id, ok := ids[r.Job.Key]; ok && id != r.Job.ID {
					t.Fatalf("key %s names jobs %s and %s", r.Job.Key, id, r.Job.ID)
				}
				ids[r.Job.Key] = r.Job.ID
			}
		}
	}
	if st, err := db.Stats(); err != nil || st[store.StatePending] != 3*n {
		t.Errorf("Stats = %v, %v; want %d pending", st, err, 3*n)
	}
}
