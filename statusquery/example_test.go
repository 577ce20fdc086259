package statusquery_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/idemrun/idemrun/statusquery"
)

// A target without an HTTP status endpoint, such as a ledger reached
// through its own client library, plugs in a CheckerFunc.
func ExampleCheckerFunc() {
	ledger := map[string]string{"pay-1": "posted", "pay-2": "reversed"}
	var checker statusquery.Checker = statusquery.CheckerFunc(func(ctx context.Context, q statusquery.Query) statusquery.Answer {
		if err := ctx.Err(); err != nil {
			return statusquery.Answer{Outcome: statusquery.NoAnswer, Detail: "canceled", Err: err}
		}
		switch ledger[q.Key] {
		case "":
			return statusquery.Answer{Outcome: statusquery.NotFound, Detail: "no ledger entry"}
		case "reversed":
			return statusquery.Answer{Outcome: statusquery.FoundFailed, Detail: "entry reversed"}
		default:
			return statusquery.Answer{Outcome: statusquery.FoundSucceeded, Detail: "entry posted"}
		}
	})
	for _, key := range []string{"pay-1", "pay-2", "pay-3"} {
		a := checker.Check(context.Background(), statusquery.Query{JobID: "job-" + key, Key: key})
		fmt.Println(key, a.Outcome, a.Detail)
	}
	// Output:
	// pay-1 found_succeeded entry posted
	// pay-2 found_failed entry reversed
	// pay-3 not_found no ledger entry
}

func ExampleInterpret() {
	for _, answer := range []struct {
		status int
		body   string
	}{
		{404, ""},
		{200, `{"id":"op_1","status":"processing"}`},
		{200, `{"status":"declined"}`},
		{200, `{"data":[]}`},
		{200, `[{"id":1},{"id":2}]`},
		{200, `{"status":42}`},
		{503, ""},
	} {
		outcome, detail := statusquery.Interpret(answer.status, []byte(answer.body), false)
		fmt.Printf("%d %-40s %-16s %s\n", answer.status, answer.body, outcome, detail)
	}
	// Output:
	// 404                                          not_found        404 not found
	// 200 {"id":"op_1","status":"processing"}      in_progress      status "processing"
	// 200 {"status":"declined"}                    found_failed     status "declined"
	// 200 {"data":[]}                              not_found        0 items
	// 200 [{"id":1},{"id":2}]                      duplicate        2 items
	// 200 {"status":42}                            found_succeeded  JSON object
	// 503                                          no_answer        503 service unavailable
}

func ExampleExpand() {
	u, err := statusquery.Expand("https://api.example.com/v1/ops/{key}?job={id}", "k/1 ü", "job 7")
	fmt.Println(u, err)
	// Output:
	// https://api.example.com/v1/ops/k%2F1%20%C3%BC?job=job+7 <nil>
}

func ExampleHTTPChecker() {
	ln, srv := startExampleServer(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"id":"pay_1","status":"processing"}`)
	})
	defer srv.Close()

	checker := &statusquery.HTTPChecker{}
	defer checker.CloseIdleConnections()
	a := checker.Check(context.Background(), statusquery.Query{
		JobID:     "job-1",
		Key:       "idem-1",
		JobMethod: http.MethodPost,
		JobURL:    "http://" + ln + "/v1/payments",
		JobHeader: http.Header{"Authorization": {"Bearer t0k"}, "Content-Type": {"application/json"}},
		Template:  "http://" + ln + "/v1/payments?idempotency_key={key}",
	})
	fmt.Println(a.Outcome, a.HTTPStatus, a.Detail)
	// Output:
	// in_progress 200 status "processing"
}
