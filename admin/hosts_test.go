package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/pgtest"
	"github.com/idemrun/idemrun/store/postgres"
)

// hostsServer serves the admin API of a client on a fresh Postgres
// schema.
func hostsServer(t *testing.T) (*httptest.Server, *api.Client) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	opts := &api.Options{Postgres: &postgres.Options{Schema: schema}}
	if err := api.Migrate(context.Background(), url, opts); err != nil {
		t.Fatal(err)
	}
	c, err := api.Open(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(admin.Handler(c, admin.Options{}))
	t.Cleanup(srv.Close)
	return srv, c
}

// call sends one request and returns its status and body.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The host routes, as a script would call them: PUT changes the limits
// its body gives and answers the policy; GET lists hosts with their
// policies and waiting jobs; pause and resume take an optional body;
// DELETE answers 204, then 404 not_found.
func TestAdminHostRoutes(t *testing.T) {
	t.Parallel()
	srv, _ := hostsServer(t)
	code, b := call(t, srv, "PUT", "/v1/hosts/API.example.com", `{"rate":40,"burst":5,"settle":"6s","actor":"alice"}`)
	var p map[string]any
	if code != 200 || json.Unmarshal(b, &p) != nil || p["host"] != "api.example.com" || p["rate"] != 40.0 || p["burst"] != 5.0 ||
		p["settle"] != float64(6*time.Second) || p["updated_by"] != "alice" {
		t.Fatalf("PUT = %d %s; want 200 and the policy", code, b)
	}
	code, b = call(t, srv, "PUT", "/v1/hosts/api.example.com", `{"concurrency":2}`)
	if code != 200 || !strings.Contains(string(b), `"rate":40`) || !strings.Contains(string(b), `"concurrency":2`) {
		t.Errorf("second PUT = %d %s; want the rate kept and concurrency 2", code, b)
	}
	if code, b := call(t, srv, "PUT", "/v1/hosts/%2A", `{"rate":100}`); code != 200 || !strings.Contains(string(b), `"host":"*"`) {
		t.Errorf("PUT of the default policy = %d %s", code, b)
	}
	code, b = call(t, srv, "POST", "/v1/hosts/api.example.com/pause", `{"actor":"bob","note":"their outage"}`)
	if code != 200 || !strings.Contains(string(b), `"paused":true`) || !strings.Contains(string(b), `"note":"their outage"`) {
		t.Errorf("pause = %d %s", code, b)
	}
	code, b = call(t, srv, "GET", "/v1/hosts", "")
	var list struct {
		Hosts []api.HostStatus `json:"hosts"`
	}
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Hosts) != 2 || list.Hosts[0].Host != "*" ||
		list.Hosts[1].Policy == nil || !list.Hosts[1].Policy.Paused {
		t.Errorf("GET /v1/hosts = %d %s; want * and the paused api.example.com", code, b)
	}
	if code, b := call(t, srv, "POST", "/v1/hosts/api.example.com/resume", ""); code != 200 || strings.Contains(string(b), `"paused"`) {
		t.Errorf("resume = %d %s; want not paused", code, b)
	}
	if code, b := call(t, srv, "DELETE", "/v1/hosts/api.example.com", ""); code != 204 {
		t.Errorf("DELETE = %d %s; want 204", code, b)
	}
	if code, b := call(t, srv, "DELETE", "/v1/hosts/api.example.com", ""); code != 404 || !strings.Contains(string(b), `"not_found"`) {
		t.Errorf("DELETE again = %d %s; want 404 not_found", code, b)
	}
}

// Bad input to the host routes is a 400 invalid_input naming the field
// (or a 404 for a path no route has), never a 5xx, and changes nothing.
func TestAdminHostRoutesRefuse(t *testing.T) {
	t.Parallel()
	srv, c := hostsServer(t)
	if _, err := c.PauseHost(context.Background(), "api.example.com", "", "first"); err != nil {
		t.Fatal(err)
	}
	before, _ := c.HostPolicies(context.Background())
	for _, tc := range []struct{ method, path, body, field string }{
		{"PUT", "/v1/hosts/api.example.com", `{"rate":0}`, "rate"},
		{"PUT", "/v1/hosts/api.example.com", `{"rate":-3}`, "rate"},
		{"PUT", "/v1/hosts/api.example.com", `{"burst":0}`, "burst"},
		{"PUT", "/v1/hosts/api.example.com", `{"concurrency":-1}`, "concurrency"},
		{"PUT", "/v1/hosts/api.example.com", `{"settle":"fast"}`, "settle"},
		{"PUT", "/v1/hosts/api.example.com", `{"settle":"-1s"}`, "settle"},
		{"PUT", "/v1/hosts/api.example.com", `{"settle":"2h"}`, "settle"},
		{"PUT", "/v1/hosts/api.example.com", `{"rate":"40/s"}`, "request body"},
		{"PUT", "/v1/hosts/api.example.com", `{"speed":1}`, "request body"},
		{"PUT", "/v1/hosts/api.example.com", `{"rate":1}{}`, "request body"},
		{"PUT", "/v1/hosts/api.example.com", `not json`, "request body"},
		{"PUT", "/v1/hosts/https:%2F%2Fapi.example.com", `{"rate":1}`, "host"},
		{"PUT", "/v1/hosts/api.example.com%2Fv1", `{"rate":1}`, "host"},
		{"PUT", "/v1/hosts/user@api.example.com", `{"rate":1}`, "host"},
		{"PUT", "/v1/hosts/api%20example.com", `{"rate":1}`, "host"},
		{"POST", "/v1/hosts/api.example.com/pause", `{"note":"` + strings.Repeat("n", api.MaxNoteLen+1) + `"}`, "note"},
		{"POST", "/v1/hosts/%2A.example.com/pause", ``, "host"},
		{"DELETE", "/v1/hosts/api.example.com:99999", ``, "host"},
	} {
		code, b := call(t, srv, tc.method, tc.path, tc.body)
		if code != 400 || !strings.Contains(string(b), `"invalid_input"`) || !strings.Contains(string(b), "invalid "+tc.field) {
			t.Errorf("%s %s %s = %d %s; want 400 invalid_input naming %s", tc.method, tc.path, tc.body, code, b, tc.field)
		}
	}
	if after, _ := c.HostPolicies(context.Background()); !reflect.DeepEqual(after, before) {
		t.Errorf("refused requests changed the policies:\n got  %+v\n want %+v", after, before)
	}
}
