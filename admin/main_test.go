package admin_test

import (
	"os"
	"testing"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// TestMain starts a throwaway Postgres server for the tests of the host
// routes, whose store must keep host policies (pgtest.Schema).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
