package statusquery

import "testing"

// A not-found word or a null inside a one-item list is no answer, as the
// same object unwrapped is: these used to end a job succeeded with nothing
// created (found in a review).
func TestOneItemListNotFoundIsNoAnswer(t *testing.T) {
	for _, body := range []string{
		`[{"status":"not_found"}]`,
		`{"data":[{"status":"unknown"}]}`,
		`[{"state":"missing"}]`,
		`[{"status":"None"}]`,
		`[null]`,
		`{"data":[null]}`,
		`[{"data":null}]`,
		`{"data":[{"data":null}]}`,
		`[{"data":[]}]`,
		`[{"data":[{"status":"failed"}]}]`,
		`[{"data":[{"status":"pending"}]}]`,
		`{"data":[{"data":[{"id":"p1"},{"id":"p2"}]}]}`,
	} {
		if got, why := Interpret(200, []byte(body), false); got != NoAnswer {
			t.Errorf("%s: %s (%s); want no_answer, as for the same object unwrapped", body, got, why)
		}
	}
	// A found item stays found.
	for body, want := range map[string]Outcome{
		`[{"status":"succeeded"}]`: FoundSucceeded,
		`[{"id":"pay_1"}]`:         FoundSucceeded,
		`[{"status":"failed"}]`:    FoundFailed,
		`[{"status":"pending"}]`:   InProgress,
	} {
		if got, why := Interpret(200, []byte(body), false); got != want {
			t.Errorf("%s: %s (%s); want %s", body, got, why, want)
		}
	}
}
