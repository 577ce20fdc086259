package pgtest

import (
	"errors"
	"testing"
)

// Private starts a server for t alone (one it may crash-restart or stop
// without disturbing other tests), stopped when t ends. Without the
// server binaries it skips t, or fails it in CI, as URL does; it starts a
// server even when EnvURL names one, since that one is not the test's to
// restart.
func Private(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if errors.Is(err, ErrNoServer) {
		if InCI() {
			t.Fatalf("no Postgres server, and CI=true does not allow skipping: %v", err)
		}
		t.Skipf("no Postgres server: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}
