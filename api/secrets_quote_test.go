package api_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/runner"
)

// The job's own api_key is scrubbed from error texts by plain substring
// match, but net/http quotes the URL with %q: a value with a quote,
// backslash or non-printable rune is escaped in the text and no longer
// matches.
func TestQuotedURLSecretIsScrubbed(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	secrets := map[string]string{"q-quote": `pk"quoted1234`, "q-bslash": `pk\bslash1234`, "q-nbsp": "pk\u00a0nbsp1234"}
	for key, sec := range secrets {
		u := closed + "/pay?api_key=" + sec
		if _, err := api.Validate(api.Request{URL: u}, api.EnqueueOptions{}, nil); err != nil {
			t.Logf("%s: URL refused at enqueue (fine): %v", key, err)
			delete(secrets, key)
			continue
		}
		if _, err := c.Enqueue(ctx, api.Request{URL: u, Body: []byte("{}")}, api.EnqueueOptions{Key: key, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	runIdle(t, c, runner.Config{})
	for key, sec := range secrets {
		v, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		core := sec[len(sec)-8:] // past the odd byte: "ted1234"-like tail
		if strings.Contains(v.LastError, core) || strings.Contains(string(b), core) {
			t.Errorf("%s: view shows the api_key value %q: last_error %q", key, sec, v.LastError)
		}
	}
}
