package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A target that answers 409 (in progress) to every send: 409s are not
// counted against --max-attempts (up to max-attempts of them), so the job
// starts more attempts than its limit. `attempts` counts them all;
// `attempts_left` says what the limit still allows, and show and list
// print what the limit counted. Before, show printed "4 of 2" and
// scripts computing max_attempts - attempts got a negative number (found
// in a contract review).
func TestAttemptsLeftAfter409s(t *testing.T) {
	t.Parallel()
	var sends atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sends.Add(1)
		w.WriteHeader(http.StatusConflict)
	}))
	defer srv.Close()
	e := newEnv(t)
	e.ok("enqueue", "--url", srv.URL+"/p", "--key", "c409", "--max-attempts", "2")
	e.okProc("run", "--until-idle", "--backoff-base", "10ms", "--backoff-cap", "50ms")
	var j struct {
		State        string `json:"state"`
		Attempts     int    `json:"attempts"`
		MaxAttempts  int    `json:"max_attempts"`
		AttemptsLeft *int   `json:"attempts_left"`
	}
	r := e.ok("show", "c409", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("%s\n%v", r, err)
	}
	if j.AttemptsLeft == nil {
		t.Fatalf("show --json has no attempts_left:\n%s", r.stdout)
	}
	if int64(j.Attempts) != sends.Load() || j.Attempts != 4 || *j.AttemptsLeft != 0 || j.MaxAttempts != 2 {
		t.Errorf("after %d sends all answered 409: attempts %d, attempts_left %d, max_attempts %d; want attempts 4 (2 free 409s + 2 counted), attempts_left 0, max_attempts 2",
			sends.Load(), j.Attempts, *j.AttemptsLeft, j.MaxAttempts)
	}
	if txt := e.ok("show", "c409").stdout; !strings.Contains(txt, "2 of 2 counted, 4 started") {
		t.Errorf("show does not say what the limit counted:\n%s", txt)
	}
	if txt := e.ok("list").stdout; !strings.Contains(txt, " 2/2 ") {
		t.Errorf("list does not show 2/2 attempts counted:\n%s", txt)
	}
}
