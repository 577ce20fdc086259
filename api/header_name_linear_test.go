package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
)

// TestInvalidHeaderNameIsLinear: refusing an invalid header name must not
// cost time quadratic in its length (a 256 KiB name is well under the admin
// API's body limits and is checked before MaxHeaderBytes).
func TestInvalidHeaderNameIsLinear(t *testing.T) {
	name := strings.Repeat("a", 256<<10) + " x"
	done := make(chan error, 1)
	go func() {
		_, err := api.Validate(api.Request{URL: "http://127.0.0.1:9/pay", Header: []api.Header{{Name: name, Value: "v"}}}, api.EnqueueOptions{}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("invalid header name accepted")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Validate of one invalid 256 KiB header name still running after 2s ")
	}
}
