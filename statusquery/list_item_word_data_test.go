package statusquery

import "testing"

// A list's one item with a status word the protocol does not know and a
// "data" list (holding a failed or pending operation, or two) never ends a
// job succeeded (found in a review: only items without a word were
// covered).
func TestOneItemWithWordAndDataListIsNoAnswer(t *testing.T) {
	for _, c := range []struct{ item string }{
		{`{"status":"completed","data":[{"status":"failed"}]}`},
		{`{"state":"ok","data":[{"status":"pending"}]}`},
		{`{"status":"done","data":[{"id":1},{"id":2}]}`},
	} {
		un, undetail := Interpret(200, []byte(c.item), false)
		li, lidetail := Interpret(200, []byte("["+c.item+"]"), false)
		wr, wrdetail := Interpret(200, []byte(`{"data":[`+c.item+`]}`), false)
		if li == FoundSucceeded || wr == FoundSucceeded {
			t.Errorf("%s: unwrapped %s (%s); as a list's one item %s (%s); under data %s (%s)", c.item, un, undetail, li, lidetail, wr, wrdetail)
		}
	}
}
