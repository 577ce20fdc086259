// Package pgtest gives tests a throwaway Postgres server: one per test
// binary, started by Main (initdb into a temporary directory, postgres on a
// free 127.0.0.1 port, stopped when the tests end), or the server named by
// IDEMRUN_TEST_POSTGRES. Each test gets a fresh schema of its own (Schema).
//
// Without a server (no IDEMRUN_TEST_POSTGRES, no initdb and postgres
// binaries) the tests that need one skip, saying why; with CI=true they
// fail instead, so a CI machine that lost its Postgres cannot pass by
// skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable that points the tests at a
// server of one's own instead of a throwaway one. The URL's user must be
// allowed to create schemas in its database.
const EnvURL = "IDEMRUN_TEST_POSTGRES"

var (
	serverURL   string
	unavailable string // why there is no server, when there is none
	runID       string // tells this binary's schemas from other runs'
	schemas     atomic.Int64
)

// Main runs a package's tests with a server: it starts one (or takes
// IDEMRUN_TEST_POSTGRES), runs m, stops the server and returns the exit
// code. Use it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	var b [4]byte
	_, _ = rand.Read(b[:])
	runID = hex.EncodeToString(b[:])
	if u := os.Getenv(EnvURL); u != "" {
		serverURL = u
		return m.Run()
	}
	srv, err := Start()
	switch {
	case errors.Is(err, ErrNoServer):
		unavailable = err.Error()
		return m.Run()
	case err != nil:
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	serverURL = srv.URL
	code := m.Run()
	if err := srv.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// InCI reports whether the tests run in CI (CI set to true), where a
// missing server fails the tests instead of skipping them.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// URL returns the URL of the tests' server. Without one it skips t, or
// fails it in CI.
func URL(t testing.TB) string {
	t.Helper()
	if serverURL != "" {
		return serverURL
	}
	why := unavailable
	if why == "" {
		why = "pgtest.Main did not run (call it from TestMain)"
	}
	if InCI() {
		t.Fatalf("no Postgres server, and CI=true does not allow skipping: %s", why)
	}
	t.Skipf("no Postgres server: %s", why)
	return ""
}

// Schema returns the server's URL and the name of a schema no other test
// uses (it does not exist yet), and drops that schema with all it holds
// when t ends. It skips or fails t as URL does.
func Schema(t testing.TB) (url, schema string) {
	t.Helper()
	url = URL(t)
	schema = fmt.Sprintf("idemrun_test_%s_%d", runID, schemas.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return url, schema
}
