package api_test

import (
	"encoding/json"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// A job object from a runner older than attempts_left (the admin API
// between a new CLI and an old runner) reads as that runner meant it:
// max_attempts - attempts left, not 0 (found in a review).
func TestJobFromOlderRunnerHasAttemptsLeft(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`{"id":"a","attempts":0,"max_attempts":3}`, 3},
		{`{"id":"a","attempts":1,"max_attempts":2}`, 1},
		{`{"id":"a","attempts":4,"max_attempts":2}`, 0},
		{`{"id":"a","attempts":4,"max_attempts":2,"attempts_left":0}`, 0},
		{`{"id":"a","attempts":4,"max_attempts":2,"attempts_left":1}`, 1},
	} {
		var j api.Job
		if err := json.Unmarshal([]byte(c.in), &j); err != nil {
			t.Fatal(err)
		}
		if j.AttemptsLeft != c.want || j.ID != "a" {
			t.Errorf("%s: attempts_left %d (id %q), want %d", c.in, j.AttemptsLeft, j.ID, c.want)
		}
	}
}
