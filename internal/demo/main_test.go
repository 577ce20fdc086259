package demo

import (
	"os"
	"testing"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// TestMain provides the shared Postgres server of pgtest.Schema.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
