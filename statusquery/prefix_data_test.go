package statusquery_test

import (
	"strings"
	"testing"

	"github.com/idemrun/idemrun/statusquery"
)

// A 2xx answer whose whole body says the operation is in progress (the
// status row comes first, DESIGN §5 / Interpret's doc) but whose "data"
// list of events is long: cut by the cap after the second event, the
// prefix proves no duplicate (a status member may follow, or a second
// "data"), so it is no answer and the job is queried again.
func TestPrefixDataListProvesNoDuplicate(t *testing.T) {
	events := strings.Repeat(`{"event":"accepted","at":"2026-01-01T00:00:00Z"},`, 2000)
	full := `{"data":[` + events + `{"event":"x"}],"status":"processing"}`
	if out, d := statusquery.Interpret(200, []byte(full), false); out != statusquery.InProgress {
		t.Fatalf("whole body: %s (%s); the test expects in_progress", out, d)
	}
	prefix := full[:64<<10]
	out, d := statusquery.Interpret(200, []byte(prefix), true)
	t.Logf("prefix: %s (%s)", out, d)
	if out == statusquery.Duplicate {
		t.Errorf("a prefix proves no duplicate while a status member may follow: got %s (%s); want no_answer", out, d)
	}
	// Also "data" given twice is ambiguous (NoAnswer) in a whole body.
	amb := `{"data":[{"a":1},{"a":2}],"data":[]}`
	if out, _ := statusquery.Interpret(200, []byte(amb), false); out != statusquery.NoAnswer {
		t.Fatalf("whole ambiguous body: %s", out)
	}
	if out, d := statusquery.Interpret(200, []byte(amb[:28]), true); out == statusquery.Duplicate {
		t.Errorf("prefix %q: %s (%s); the whole body could be ambiguous (no_answer)", amb[:28], out, d)
	}
}
