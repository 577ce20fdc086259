package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/runner"
)

// A target's error body that echoes the job's bearer token is scrubbed when
// it is valid UTF-8, but a body with one non-UTF-8 byte (a Latin-1 error
// page) is shown whole as body_base64, token included.
func TestNonUTF8ResultBodyIsScrubbed(t *testing.T) {
	const tok = "sk_live_tokenABC123"
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Ung\xfcltiges Token: "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	t.Cleanup(tg.Close)
	res, err := c.Enqueue(ctx, api.Request{URL: tg.URL + "/pay", Header: []api.Header{{Name: "Authorization", Value: "Bearer " + tok}}, Body: []byte("{}")},
		api.EnqueueOptions{Key: "latin1", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	runIdle(t, c, runner.Config{})
	v, err := c.Get(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result == nil {
		t.Fatalf("no result recorded (state %s)", v.State)
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(v.Result.BodyBase64), tok) || strings.Contains(v.Result.Body, tok) {
		t.Errorf("state %s: result shows the bearer token; JSON view:\n%s", v.State, b)
	}
}
