package faketarget_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/idemrun/idemrun/internal/faketarget"
)

// A deduplicating target whose first answer is lost: the create happened, and
// a retry with the same key and body gets the stored payment back.
func Example() {
	s, err := faketarget.Start(faketarget.Config{Dedup: true, Faults: faketarget.Faults{LoseResponse: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/payments", strings.NewReader(`{"amount":1200}`))
		req.Header.Set("Idempotency-Key", "order-42")
		return client.Do(req)
	}

	_, err = send()
	fmt.Println("first attempt lost its answer:", err != nil)

	s.SetFaults(faketarget.Faults{})
	resp, err := send()
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("retry:", resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"))
	fmt.Println("creates:", s.Creates("order-42"), "duplicates:", len(s.Duplicates()))
	// Output:
	// first attempt lost its answer: true
	// retry: 201 replayed: true
	// creates: 1 duplicates: 0
}
