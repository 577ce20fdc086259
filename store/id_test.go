package store_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/idemrun/idemrun/store"
)

func TestNewIDIsIncreasingUUIDv7(t *testing.T) {
	prev := ""
	for i := 0; i < 10000; i++ {
		id := store.NewID()
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("NewID() = %q: %v", id, err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("NewID() = %q: version %d variant %v, want 7 and RFC 4122", id, u.Version(), u.Variant())
		}
		if id <= prev {
			t.Fatalf("NewID() = %q after %q: ids must increase", id, prev)
		}
		prev = id
	}
}
