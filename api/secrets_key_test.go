package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/runner"
)

// A secret carried only by the status-url template (its own api_key, not
// the job's) must not reach the views: history errors that quote the
// expanded status URL, or a status answer that echoes it.
func TestStatusURLSecretNeverShown(t *testing.T) {
	const statusSecret = "status-secret-q9z"
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()

	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ops") {
			// A status API that echoes the query it was asked.
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"succeeded","query":"`+r.URL.RawQuery+`"}`)
			return
		}
		w.WriteHeader(http.StatusInternalServerError) // unknown outcome
	}))
	t.Cleanup(tg.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	jobs := map[string]string{
		"status-refused": closed + "/ops?api_key=" + statusSecret + "&k={key}",
		"status-echo":    tg.URL + "/ops?api_key=" + statusSecret + "&k={key}",
	}
	ids := map[string]string{}
	for key, su := range jobs {
		res, err := c.Enqueue(ctx, api.Request{URL: tg.URL + "/pay", Body: []byte(`{}`)},
			api.EnqueueOptions{Key: key, MaxAttempts: 1, StatusURL: su})
		if err != nil {
			t.Fatalf("Enqueue(%s): %v", key, err)
		}
		ids[key] = res.Job.ID
	}
	runIdle(t, c, runner.Config{
		QuietPeriod: 5 * time.Millisecond, StatusBudget: 1,
		StatusBackoff: runner.Backoff{Base: 2 * time.Millisecond, Cap: 5 * time.Millisecond},
		Backoff:       runner.Backoff{Base: 2 * time.Millisecond, Cap: 5 * time.Millisecond},
	})
	for key, id := range ids {
		v, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), statusSecret) {
			t.Errorf("job %s (state %s): view leaks the status-url secret:\n%s", key, v.State, b)
		}
	}
}

// A header line without a colon is shown by its first word only, since the
// line may be a credential; with a colon later in the line, the whole part
// before the colon is shown as the "header name".
func TestParseHeaderLineHidesCredential(t *testing.T) {
	for _, line := range []string{
		"Authorization Bearer sk_live_51Hx9:abc",
		"Authorization Basic alice:s3cr3tpw",
		"X-Api-Key sk_live_51Hx9 # note: rotated",
		"Cookie sid=sessval42; at=10:00",
	} {
		_, err := api.ParseHeaderLine(line)
		if err == nil {
			t.Errorf("ParseHeaderLine(%q) accepted", line)
			continue
		}
		for _, s := range []string{"sk_live_51Hx9", "s3cr3tpw", "sessval42"} {
			if strings.Contains(line, s) && strings.Contains(err.Error(), s) {
				t.Errorf("ParseHeaderLine(%q) error echoes the credential %q: %v", line, s, err)
			}
		}
	}
}

// runIdle runs a runner on c with cfg (UntilIdle, a short startup spread
// and poll interval added) until no job is left to work, for at most 15 s.
func runIdle(t *testing.T, c *api.Client, cfg runner.Config) {
	t.Helper()
	cfg.UntilIdle = true
	cfg.StartupSpread = time.Millisecond
	cfg.PollInterval = 10 * time.Millisecond
	r, err := c.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
