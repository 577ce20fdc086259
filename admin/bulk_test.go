package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/internal/apitest"
)

// POST /v1/bulk on TCP: the token is required; a body with an unknown
// field, a bad time or a bad filter is 400 invalid_input naming it and
// changes nothing; a dry run answers the count.
func TestAdminBulk(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{})
	for _, k := range []string{"p-1", "p-2"} {
		apitest.EnqueueOK(t, c, apitest.HostileURL, k)
	}
	const tok = "0123456789abcdef0123"
	srv := httptest.NewServer(admin.Handler(c, admin.Options{Token: tok}))
	defer srv.Close()
	post := func(body, token string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+adminwire.PathBulk, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	before := apitest.Snapshot(t, c)
	cancel := `{"states":["pending"],"action":"cancel","note":"n"}`
	if code, _ := post(cancel, ""); code != http.StatusUnauthorized {
		t.Errorf("bulk without the token: %d; want 401", code)
	}
	for _, c := range []struct{ body, field string }{
		{`{"states":["pending"],"action":"cancel","note":"n","colour":"red"}`, "request body"},
		{`{"states":["pending"],"action":"cancel","note":"n","since":"yesterday"}`, "since"},
		{`{"states":["pending"],"action":"cancel","note":"n","until":"1h"}`, "until"},
		{`{"states":["bogus"],"action":"cancel","note":"n"}`, "states"},
		{`{"states":["pending"],"action":"delete","note":"n"}`, "action"},
		{`{"states":["pending"],"action":"cancel"}`, "note"},
		{`{"states":["pending"],"action":"cancel","note":"n","host":"a b"}`, "host"},
		{`{"action":"cancel","note":"n"}`, "state"},
	} {
		code, b := post(c.body, tok)
		var e adminwire.Error
		_ = json.Unmarshal(b, &e)
		if code != http.StatusBadRequest || e.Error.Code != adminwire.CodeInvalid || !strings.Contains(e.Error.Message, "invalid "+c.field+" ") {
			t.Errorf("bulk %s: %d %s; want 400 invalid_input naming %s", c.body, code, b, c.field)
		}
	}
	if after := apitest.Snapshot(t, c); after != before {
		t.Errorf("refused bulk requests changed the store")
	}
	code, b := post(`{"states":["pending"],"action":"cancel","note":"n","dry_run":true}`, tok)
	var res api.BulkResult
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil || res.Matched != 2 || res.Changed != 0 {
		t.Errorf("dry run: %d %s; want 200 with 2 matched, 0 changed", code, b)
	}
	code, b = post(cancel, tok)
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil || res.Matched != 2 || res.Changed != 2 {
		t.Errorf("bulk cancel: %d %s; want 200 with 2 of 2 changed", code, b)
	}
	if st, _ := c.Stats(context.Background()); st["canceled"] != 2 {
		t.Errorf("stats after the bulk cancel: %v; want 2 canceled", st)
	}
}
