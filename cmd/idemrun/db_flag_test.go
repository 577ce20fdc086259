package main

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// testPassword is a password put in the tests' database URLs (the
// server trusts loopback logins, so any password is accepted); no
// command may print it.
const testPassword = "pw-Secret-77"

// withPassword returns the URL with testPassword as its user's password.
func withPassword(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), testPassword)
	return u.String()
}

// noPassword fails the test if a command printed the URL's password.
func noPassword(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, testPassword) {
		t.Errorf("idemrun %s printed the database password:\n%s", strings.Join(r.args, " "), r)
	}
}

// Every command works on a postgres:// --db, directly, and none prints
// the URL's password.
func TestDBFlagTakesAPostgresURL(t *testing.T) {
	e := pgEnv(t)
	e.db = withPassword(t, e.db)
	check := func(r result) result { t.Helper(); noPassword(t, r); return r }
	check(e.ok("migrate"))
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })

	one := jsonObject(t, check(e.ok("enqueue", "--url", tg.url("/pay"), "--data", `{"n":1}`, "--key", "k1", "--json")))
	again := jsonObject(t, check(e.ok("enqueue", "--url", tg.url("/pay"), "--data", `{"n":1}`, "--key", "k1", "--json")))
	if again["id"] != one["id"] || again["existing"] != true {
		t.Errorf("the same request under its key: got %v, want existing %v", again, one["id"])
	}
	if r := check(e.run("enqueue", "--url", tg.url("/pay"), "--data", `{"n":2}`, "--key", "k1")); r.code != exitFailure || !strings.Contains(r.stderr, "for a different request") {
		t.Errorf("another request under the key: want a conflict, got:\n%s", r)
	}
	from := `{"url":"` + tg.url("/pay") + `","data":"{\"n\":3}","key":"k3"}` + "\n" + `{"url":"` + tg.url("/pay") + `","data":"{\"n\":4}","key":"k4"}` + "\n"
	if r := check(e.runStdin([]byte(from), "enqueue", "--from", "-")); r.code != 0 {
		t.Fatalf("enqueue --from: %s", r)
	}
	cancelMe := jsonObject(t, check(e.ok("enqueue", "--url", tg.url("/pay"), "--data", `{"n":5}`, "--key", "k5", "--run-at", "1h", "--deadline", "2h", "--json")))

	if jobs := jsonArray(t, check(e.ok("list", "--json"))); len(jobs) != 4 {
		t.Errorf("list: %d jobs, want 4", len(jobs))
	}
	if j := e.showJob("k3"); j["state"] != "pending" {
		t.Errorf("show k3: %v", j)
	}
	check(e.ok("cancel", cancelMe["id"].(string), "--note", "not needed"))
	if r := check(e.run("retry", "k1")); r.code != exitFailure {
		t.Errorf("retry of a pending job: want exit 1 (illegal transition), got:\n%s", r)
	}
	if r := check(e.run("resolve", "k1", "--as", "succeeded", "--note", "n")); r.code != exitFailure {
		t.Errorf("resolve of a pending job: want exit 1 (illegal transition), got:\n%s", r)
	}
	check(e.okProc("run", "--until-idle", "--log-level", "debug"))
	st := e.statsOf()
	if st["succeeded"] != 3 || st["canceled"] != 1 {
		t.Errorf("after run: %v, want 3 succeeded and 1 canceled", st)
	}
	if n := len(tg.requests("/pay")); n != 3 {
		t.Errorf("target got %d creates, want 3", n)
	}
	check(e.ok("watch", "--count", "1"))
	if r := check(e.ok("check")); !strings.Contains(r.stdout, "ok (4 jobs") {
		t.Errorf("check: %s", r)
	}
	if r := check(e.run("backup", "out.db")); r.code != exitUsage || !strings.Contains(r.stderr, "pg_dump") {
		t.Errorf("backup of a Postgres database: want exit 2 naming pg_dump, got:\n%s", r)
	}
	if r := check(e.run("compact")); r.code != exitUsage || !strings.Contains(r.stderr, "VACUUM") {
		t.Errorf("compact of a Postgres database: want exit 2 naming VACUUM, got:\n%s", r)
	}
	e2 := *e
	e2.db = ""
	if r := check(e2.run("list", "--db", e.db, "--limit", "1")); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "--cursor") {
		t.Errorf("a page of a list: want the next page's command, got:\n%s", r)
	}
}

// A database that cannot be reached is bad input: one line naming what
// is wrong, exit 2, and no password.
func TestDBFlagUnreachablePostgres(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nothing listens on
	e := newEnv(t)
	base := pgEnv(t).db
	u, _ := url.Parse(withPassword(t, base))
	missingDB := *u
	missingDB.Path = "/no_such_database"
	u.Host = addr
	for name, db := range map[string]string{
		"refused":          u.String(),
		"refused, plain":   "postgres://postgres:" + testPassword + "@" + addr + "/postgres",
		"missing database": missingDB.String(),
		"bad port":         "postgres://postgres:" + testPassword + "@127.0.0.1:99999999/x",
	} {
		e.db = db
		for _, cmd := range [][]string{{"list"}, {"migrate"}, {"bench", "--db", db, "--jobs", "10"}, {"demo", "--db", db, "--jobs", "10"}} {
			var r result
			if slices.Contains(processWide, cmd[0]) {
				r = e.runProc(cmd...)
			} else {
				r = e.run(cmd...)
			}
			noPassword(t, r)
			if r.code != exitUsage {
				t.Errorf("%s, %s: want exit 2, got:\n%s", name, cmd[0], r)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("%s, %s: want one line, got:\n%s", name, cmd[0], r.stderr)
			}
		}
	}
}

// --poll-only is for a Postgres --db: a bbolt file's one runner hears its
// own enqueues.
func TestRunPollOnlyNeedsPostgres(t *testing.T) {
	e := newEnv(t)
	if r := e.runProc("run", "--poll-only", "--until-idle"); r.code != exitUsage || !strings.Contains(r.stderr, "poll-only") {
		t.Errorf("run --poll-only on a file: want exit 2 naming the flag, got:\n%s", r)
	}
	p := pgEnv(t)
	p.ok("migrate")
	p.okProc("run", "--poll-only", "--until-idle")
}
