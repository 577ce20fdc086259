package statusquery_test

import (
	"strings"
	"testing"

	"github.com/idemrun/idemrun/statusquery"
)

// protocolCase is one row of ARCHITECTURE.md §5, or a body that lies about it. The
// same table runs through Interpret and through HTTPChecker.
type protocolCase struct {
	name       string
	status     int
	body       string
	truncated  bool
	want       statusquery.Outcome
	wantDetail string
	noHTTP     bool // a net/http server cannot send this answer
}

const bom = "\xEF\xBB\xBF"

func protocolCases() []protocolCase {
	cases := []protocolCase{
		// 404, 410: not found, whatever the body says.
		{name: "404", status: 404, body: "", want: statusquery.NotFound, wantDetail: "404 not found"},
		{name: "404 with found body", status: 404, body: `{"status":"succeeded"}`, want: statusquery.NotFound, wantDetail: "404 not found"},
		{name: "410", status: 410, body: "gone", want: statusquery.NotFound, wantDetail: "410 gone"},

		// 2xx, status/state in the in-progress set.
		{name: "pending", status: 200, body: `{"status":"pending"}`, want: statusquery.InProgress, wantDetail: `status "pending"`},
		{name: "processing", status: 200, body: `{"id":"op_1","status":"processing"}`, want: statusquery.InProgress, wantDetail: `status "processing"`},
		{name: "in_progress", status: 200, body: `{"status":"in_progress"}`, want: statusquery.InProgress, wantDetail: `status "in_progress"`},
		{name: "running", status: 200, body: `{"status":"running"}`, want: statusquery.InProgress, wantDetail: `status "running"`},
		{name: "queued", status: 200, body: `{"status":"queued"}`, want: statusquery.InProgress, wantDetail: `status "queued"`},
		{name: "accepted 202 state", status: 202, body: `{"state":"accepted"}`, want: statusquery.InProgress, wantDetail: `state "accepted"`},
		{name: "case and space", status: 200, body: `{"state":"  Processing \n"}`, want: statusquery.InProgress, wantDetail: `state "Processing"`},
		{name: "InProgress", status: 200, body: `{"status":"InProgress"}`, want: statusquery.InProgress, wantDetail: `status "InProgress"`},
		{name: "in-progress", status: 200, body: `{"status":"in-progress"}`, want: statusquery.InProgress, wantDetail: `status "in-progress"`},
		{name: "IN PROGRESS", status: 200, body: `{"status":"IN PROGRESS"}`, want: statusquery.InProgress, wantDetail: `status "IN PROGRESS"`},
		{name: "member name case", status: 200, body: `{"Status":"RUNNING"}`, want: statusquery.InProgress, wantDetail: `status "RUNNING"`},
		{name: "escaped word", status: 200, body: `{"status":"r\u0075nning"}`, want: statusquery.InProgress, wantDetail: `status "running"`},

		// 2xx, status/state in the failed set.
		{name: "failed", status: 200, body: `{"status":"failed","reason":"card declined"}`, want: statusquery.FoundFailed, wantDetail: `status "failed"`},
		{name: "declined", status: 200, body: `{"status":"declined"}`, want: statusquery.FoundFailed, wantDetail: `status "declined"`},
		{name: "rejected", status: 200, body: `{"status":"rejected"}`, want: statusquery.FoundFailed, wantDetail: `status "rejected"`},
		{name: "canceled", status: 200, body: `{"status":"canceled"}`, want: statusquery.FoundFailed, wantDetail: `status "canceled"`},
		{name: "cancelled", status: 200, body: `{"status":"cancelled"}`, want: statusquery.FoundFailed, wantDetail: `status "cancelled"`},
		{name: "error", status: 200, body: `{"status":"error"}`, want: statusquery.FoundFailed, wantDetail: `status "error"`},
		{name: "state DECLINED", status: 201, body: `{"state":"DECLINED"}`, want: statusquery.FoundFailed, wantDetail: `state "DECLINED"`},
		{name: "BOM before failed", status: 200, body: bom + `{"status":"failed"}`, want: statusquery.FoundFailed, wantDetail: `status "failed"`},

		// Rows in table order: in progress wins over failed, status/state over lists.
		{name: "failed status, running state", status: 200, body: `{"status":"failed","state":"running"}`, want: statusquery.InProgress, wantDetail: `state "running"`},
		{name: "succeeded status, failed state", status: 200, body: `{"status":"succeeded","state":"failed"}`, want: statusquery.FoundFailed, wantDetail: `state "failed"`},
		{name: "processing envelope, empty data", status: 200, body: `{"status":"processing","data":[]}`, want: statusquery.InProgress, wantDetail: `status "processing"`},
		{name: "JSend success, empty data", status: 200, body: `{"status":"success","data":[]}`, want: statusquery.NotFound, wantDetail: "0 items"},

		// 2xx lists.
		{name: "empty array", status: 200, body: `[]`, want: statusquery.NotFound, wantDetail: "0 items"},
		{name: "empty array spaced", status: 200, body: " [ \n ] ", want: statusquery.NotFound, wantDetail: "0 items"},
		{name: "BOM empty array", status: 200, body: bom + `[]`, want: statusquery.NotFound, wantDetail: "0 items"},
		{name: "empty data", status: 200, body: `{"object":"list","data":[],"has_more":false}`, want: statusquery.NotFound, wantDetail: "0 items"},
		{name: "two items", status: 200, body: `[{"id":1},{"id":2}]`, want: statusquery.Duplicate, wantDetail: "2 items"},
		{name: "data two numbers", status: 200, body: `{"data":[1,2]}`, want: statusquery.Duplicate, wantDetail: "2 items"},
		{name: "three failed items", status: 200, body: `[{"status":"failed"},{"status":"failed"},{"status":"failed"}]`, want: statusquery.Duplicate, wantDetail: "3 items"},
		{name: "one empty item", status: 200, body: `[{}]`, want: statusquery.FoundSucceeded, wantDetail: "1 item"},
		{name: "one item processing", status: 200, body: `[{"id":"op_1","status":"processing"}]`, want: statusquery.InProgress, wantDetail: `1 item, status "processing"`},
		{name: "one data item failed", status: 200, body: `{"data":[{"state":"failed"}]}`, want: statusquery.FoundFailed, wantDetail: `1 item, state "failed"`},
		{name: "one item succeeded", status: 200, body: `[{"status":"succeeded"}]`, want: statusquery.FoundSucceeded, wantDetail: `1 item, status "succeeded"`},
		{name: "one scalar item", status: 200, body: `["failed"]`, want: statusquery.FoundSucceeded, wantDetail: "1 item"},
		// A null item is no evidence, as a top-level null is: this row
		// expected found_succeeded until a review showed that it ends a
		// job succeeded on no evidence (lost work, silently), where no
		// answer queries again and then asks a person.
		{name: "one null item", status: 200, body: `[null]`, want: statusquery.NoAnswer, wantDetail: "1 item, JSON null"},
		{name: "nested list is one item", status: 200, body: `[[]]`, want: statusquery.FoundSucceeded, wantDetail: "1 item"},
		// An item whose data is a list: this row expected found_succeeded
		// ("item's own data not read") until a review showed that
		// [{"data":[{"status":"failed"}]}] then ended a job succeeded;
		// such nesting is no answer.
		{name: "item's own data list is no answer", status: 200, body: `[{"data":[]}]`, want: statusquery.NoAnswer, wantDetail: "1 item whose data is a list"},

		// Other 2xx: found.
		{name: "succeeded", status: 200, body: `{"status":"succeeded"}`, want: statusquery.FoundSucceeded, wantDetail: `status "succeeded"`},
		{name: "no status", status: 200, body: `{"id":"op_1","amount":100}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "not JSON", status: 200, body: "OK", want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "HTML", status: 200, body: "<html><body>failed</body></html>", want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "empty 200", status: 200, body: "", want: statusquery.FoundSucceeded, wantDetail: "empty body"},
		{name: "204", status: 204, body: "", want: statusquery.FoundSucceeded, wantDetail: "empty body"},
		{name: "whitespace only", status: 200, body: " \r\n\t", want: statusquery.FoundSucceeded, wantDetail: "empty body"},
		{name: "299 odd 2xx", status: 299, body: `{}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},

		// Lying bodies.
		{name: "status 42", status: 200, body: `{"status":42}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "status null", status: 200, body: `{"status":null}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "status true", status: 200, body: `{"status":true,"state":null}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "status object", status: 200, body: `{"status":{"status":"failed"}}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "status array", status: 200, body: `{"status":["failed"]}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "data string", status: 200, body: `{"data":"x"}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		// null is what Go encodes an empty nil list as: no evidence that
		// the operation exists (nor that it does not), so no answer.
		{name: "data null", status: 200, body: `{"data":null}`, want: statusquery.NoAnswer, wantDetail: "data is null"},
		{name: "data null beside a status word", status: 200, body: `{"id":"op_1","status":"succeeded","data":null}`, want: statusquery.FoundSucceeded, wantDetail: `status "succeeded"`},
		{name: "data null beside a state word", status: 200, body: `{"state":"completed","data":null,"error":null}`, want: statusquery.FoundSucceeded, wantDetail: `state "completed"`},
		{name: "status not_found", status: 200, body: `{"status":"not_found"}`, want: statusquery.NoAnswer, wantDetail: `status "not_found" says not found`},
		{name: "state missing", status: 200, body: `{"state":"Missing"}`, want: statusquery.NoAnswer, wantDetail: `state "Missing" says not found`},
		{name: "data object", status: 200, body: `{"data":{"items":[]}}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "nested status not read", status: 200, body: `{"result":{"status":"failed","data":[]}}`, want: statusquery.FoundSucceeded, wantDetail: "JSON object"},
		{name: "top-level string", status: 200, body: `"failed"`, want: statusquery.FoundSucceeded, wantDetail: "JSON string"},
		{name: "top-level number", status: 200, body: `42`, want: statusquery.FoundSucceeded, wantDetail: "JSON number"},
		{name: "huge number", status: 200, body: `1e999999999`, want: statusquery.FoundSucceeded, wantDetail: "JSON number"},
		{name: "huge number member", status: 200, body: `{"amount":1e999999999,"status":"queued"}`, want: statusquery.InProgress, wantDetail: `status "queued"`},
		{name: "top-level true", status: 200, body: `true`, want: statusquery.FoundSucceeded, wantDetail: "JSON boolean"},
		{name: "top-level null", status: 200, body: `null`, want: statusquery.NoAnswer, wantDetail: "JSON null"},
		{name: "trailing garbage", status: 200, body: `{"status":"failed"} x`, want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "two values", status: 200, body: `[]{"status":"failed"}`, want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "unclosed", status: 200, body: `[{"status":"failed"}`, want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "deep nesting", status: 200, body: strings.Repeat("[", 20000) + strings.Repeat("]", 20000), want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "two BOMs", status: 200, body: bom + bom + `[]`, want: statusquery.FoundSucceeded, wantDetail: "not JSON"},
		{name: "word with NUL", status: 200, body: `{"status":"failed\u0000"}`, want: statusquery.FoundSucceeded, wantDetail: `status "failed\x00"`},
		{name: "invalid UTF-8 word", status: 200, body: "{\"status\":\"\xff\"}", want: statusquery.FoundSucceeded, wantDetail: `status "` + "\uFFFD" + `"`},
		{name: "Kelvin sign is not k", status: 200, body: `{"status":"` + "\u212A" + `"}`, want: statusquery.FoundSucceeded, wantDetail: `status "` + "\u212A" + `"`},
		{name: "long word cut", status: 200, body: `{"status":"` + strings.Repeat("x", 100) + `"}`, want: statusquery.FoundSucceeded, wantDetail: `status "` + strings.Repeat("x", 32) + `"...`},
		{name: "control chars cut", status: 200, body: `{"status":"` + strings.Repeat(`\u0001`, 40) + `"}`, want: statusquery.FoundSucceeded, wantDetail: `status "` + strings.Repeat(`\x01`, 8) + `"...`},
		{name: "multibyte cut on rune", status: 200, body: `{"state":"` + strings.Repeat("é", 20) + `"}`, want: statusquery.FoundSucceeded, wantDetail: `state "` + strings.Repeat("é", 16) + `"...`},
		{name: "short control chars cut", status: 200, body: `{"status":"` + strings.Repeat(`\u0001`, 30) + `"}`, want: statusquery.FoundSucceeded, wantDetail: `status "` + strings.Repeat(`\x01`, 8) + `"...`},
		{name: "repeated status", status: 200, body: `{"status":"failed","status":"succeeded"}`, want: statusquery.NoAnswer, wantDetail: `ambiguous JSON: repeated "status"`},
		{name: "repeated data, other case", status: 200, body: `{"data":[],"DATA":[1,2]}`, want: statusquery.NoAnswer, wantDetail: `ambiguous JSON: repeated "data"`},
		{name: "repeated state in item", status: 200, body: `[{"state":"failed","State":"done"}]`, want: statusquery.NoAnswer, wantDetail: `1 item, ambiguous JSON: repeated "state"`},

		// No answer.
		{name: "100", status: 100, want: statusquery.NoAnswer, wantDetail: "100 continue", noHTTP: true},
		{name: "301", status: 301, want: statusquery.NoAnswer, wantDetail: "301 moved permanently, redirect not followed"},
		{name: "302", status: 302, body: `{"status":"succeeded"}`, want: statusquery.NoAnswer, wantDetail: "302 found, redirect not followed"},
		{name: "307", status: 307, want: statusquery.NoAnswer, wantDetail: "307 temporary redirect, redirect not followed"},
		{name: "308", status: 308, want: statusquery.NoAnswer, wantDetail: "308 permanent redirect, redirect not followed"},
		{name: "400", status: 400, body: `{"error":"bad"}`, want: statusquery.NoAnswer, wantDetail: "400 bad request"},
		{name: "401", status: 401, want: statusquery.NoAnswer, wantDetail: "401 unauthorized"},
		{name: "403", status: 403, want: statusquery.NoAnswer, wantDetail: "403 forbidden"},
		{name: "405", status: 405, want: statusquery.NoAnswer, wantDetail: "405 method not allowed"},
		{name: "408", status: 408, want: statusquery.NoAnswer, wantDetail: "408 request timeout"},
		{name: "409", status: 409, body: `{"status":"processing"}`, want: statusquery.NoAnswer, wantDetail: "409 conflict"},
		{name: "422", status: 422, want: statusquery.NoAnswer, wantDetail: "422 unprocessable entity"},
		{name: "429", status: 429, want: statusquery.NoAnswer, wantDetail: "429 too many requests"},
		{name: "500", status: 500, body: `{"status":"failed"}`, want: statusquery.NoAnswer, wantDetail: "500 internal server error"},
		{name: "502", status: 502, want: statusquery.NoAnswer, wantDetail: "502 bad gateway"},
		{name: "503", status: 503, body: "[]", want: statusquery.NoAnswer, wantDetail: "503 service unavailable"},
		{name: "504", status: 504, want: statusquery.NoAnswer, wantDetail: "504 gateway timeout"},
		{name: "599", status: 599, want: statusquery.NoAnswer, wantDetail: "599"},
		{name: "999", status: 999, body: `[]`, want: statusquery.NoAnswer, wantDetail: "invalid HTTP status 999"},
		{name: "0", status: 0, want: statusquery.NoAnswer, wantDetail: "invalid HTTP status 0", noHTTP: true},
		{name: "negative", status: -200, want: statusquery.NoAnswer, wantDetail: "invalid HTTP status -200", noHTTP: true},

		// Body over the cap: no list count or field is read from a prefix.
		{name: "truncated empty list", status: 200, body: `[`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated failed", status: 200, body: `{"status":"failed"`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated succeeded", status: 200, body: `{"status":"succeeded","log":"xx`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated processing", status: 200, body: `{"id":"op_1","status":"processing","log":"xx`, truncated: true, want: statusquery.InProgress, wantDetail: `body over cap, status "processing"`, noHTTP: true},
		{name: "truncated nested status", status: 200, body: `{"op":{"status":"processing"},"log":"xx`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated two items", status: 200, body: `[{"id":"op_1"},{"id":"op_2","log":"xx`, truncated: true, want: statusquery.Duplicate, wantDetail: "body over cap, at least 2 items before the cut", noHTTP: true},
		{name: "truncated one item", status: 200, body: `[{"id":"op_1","log":"xx`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated data two items", status: 200, body: `{"data":[1,[2,3],{"a":[4,5]}`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated nested list", status: 200, body: `[[1,2,3`, truncated: true, want: statusquery.NoAnswer, wantDetail: "body over cap, no in-progress status before the cut", noHTTP: true},
		{name: "truncated 404", status: 404, body: `x`, truncated: true, want: statusquery.NotFound, wantDetail: "404 not found", noHTTP: true},
		{name: "truncated 503", status: 503, body: `x`, truncated: true, want: statusquery.NoAnswer, wantDetail: "503 service unavailable", noHTTP: true},
	}
	return cases
}

func TestInterpret(t *testing.T) {
	t.Parallel()
	for _, tc := range protocolCases() {
		got, detail := statusquery.Interpret(tc.status, []byte(tc.body), tc.truncated)
		if got != tc.want || detail != tc.wantDetail {
			t.Errorf("%s: Interpret(%d, %.40q, %v) = %q, %q; want %q, %q",
				tc.name, tc.status, tc.body, tc.truncated, got, detail, tc.want, tc.wantDetail)
		}
	}
}

func TestInterpretEveryStatus(t *testing.T) {
	t.Parallel()
	for status := 0; status <= 1000; status++ {
		got, detail := statusquery.Interpret(status, []byte(`{"status":"succeeded"}`), false)
		var want statusquery.Outcome
		switch {
		case status == 404 || status == 410:
			want = statusquery.NotFound
		case status >= 200 && status <= 299:
			want = statusquery.FoundSucceeded
		default:
			want = statusquery.NoAnswer
		}
		if got != want || detail == "" {
			t.Errorf("Interpret(%d) = %q, %q; want %q with a detail", status, got, detail, want)
		}
	}
}

func TestOutcomeValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    statusquery.Outcome
		want bool
	}{
		{statusquery.FoundSucceeded, true},
		{statusquery.FoundFailed, true},
		{statusquery.NotFound, true},
		{statusquery.InProgress, true},
		{statusquery.Duplicate, true},
		{statusquery.NoAnswer, true},
		{"", false},
		{"found", false},
		{"FOUND_SUCCEEDED", false},
		{"not_found ", false},
	} {
		if got := tc.o.Valid(); got != tc.want {
			t.Errorf("Outcome(%q).Valid() = %v; want %v", tc.o, got, tc.want)
		}
	}
	for o, want := range map[statusquery.Outcome]string{
		statusquery.FoundSucceeded: "found_succeeded",
		statusquery.FoundFailed:    "found_failed",
		statusquery.NotFound:       "not_found",
		statusquery.InProgress:     "in_progress",
		statusquery.Duplicate:      "duplicate",
		statusquery.NoAnswer:       "no_answer",
	} {
		if string(o) != want {
			t.Errorf("outcome constant = %q; want %q", o, want)
		}
	}
}

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
		if got, why := statusquery.Interpret(200, []byte(body), false); got != statusquery.NoAnswer {
			t.Errorf("%s: %s (%s); want no_answer, as for the same object unwrapped", body, got, why)
		}
	}
	// A found item stays found.
	for body, want := range map[string]statusquery.Outcome{
		`[{"status":"succeeded"}]`: statusquery.FoundSucceeded,
		`[{"id":"pay_1"}]`:         statusquery.FoundSucceeded,
		`[{"status":"failed"}]`:    statusquery.FoundFailed,
		`[{"status":"pending"}]`:   statusquery.InProgress,
	} {
		if got, why := statusquery.Interpret(200, []byte(body), false); got != want {
			t.Errorf("%s: %s (%s); want %s", body, got, why, want)
		}
	}
}

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
		un, undetail := statusquery.Interpret(200, []byte(c.item), false)
		li, lidetail := statusquery.Interpret(200, []byte("["+c.item+"]"), false)
		wr, wrdetail := statusquery.Interpret(200, []byte(`{"data":[`+c.item+`]}`), false)
		if li == statusquery.FoundSucceeded || wr == statusquery.FoundSucceeded {
			t.Errorf("%s: unwrapped %s (%s); as a list's one item %s (%s); under data %s (%s)", c.item, un, undetail, li, lidetail, wr, wrdetail)
		}
	}
}

// A 2xx answer whose whole body says the operation is in progress (the
// status row comes first, ARCHITECTURE.md §5 / Interpret's doc) but whose "data"
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
