package postgres_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
	"github.com/idemrun/idemrun/store/storetest"
)

var ctx = context.Background()

// TestMain starts one throwaway server for the package's tests (or uses
// IDEMRUN_TEST_POSTGRES); each test gets a schema of its own.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newStore migrates a fresh schema and opens it. When the test ends the
// store must pass Check (unless the test closed it), and is closed.
func newStore(t testing.TB, o *postgres.Options) (*postgres.DB, string, string) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	var opts postgres.Options
	if o != nil {
		opts = *o
	}
	opts.Schema = schema
	if err := postgres.Migrate(ctx, url, &opts); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return openStore(t, url, &opts), url, schema
}

// openStore opens a handle on a migrated schema, checked and closed when
// the test ends.
func openStore(t testing.TB, url string, o *postgres.Options) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(ctx, url, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		rep, err := db.Check()
		if errors.Is(err, store.ErrClosed) {
			return
		}
		if err != nil || !rep.OK() {
			t.Errorf("Check after the test = %+v, %v; want no problems", rep, err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		db, _, _ := newStore(t, nil)
		return db
	})
}

// The contract holds in pgx's query modes for poolers in transaction
// mode (the URL's default_query_exec_mode), which send every argument
// as text.
func TestContractInPoolerQueryModes(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store {
				url, schema := pgtest.Schema(t)
				sep := "?"
				if strings.Contains(url, "?") {
					sep = "&"
				}
				url += sep + "default_query_exec_mode=" + mode
				opts := &postgres.Options{Schema: schema, PollOnly: true}
				if err := postgres.Migrate(ctx, url, opts); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
				return openStore(t, url, opts)
			})
		})
	}
}
