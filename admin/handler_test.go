package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/adminwire"
	"github.com/idemrun/idemrun/internal/apitest"
)

// A backup client that stops reading (a suspended `idemrun backup`, a
// stalled pipe) must not keep the backup's read transaction open for as
// long as it likes: bbolt cannot remap a file that must grow while a read
// transaction is open, so every write that needs more room would hang, the
// runner's included. The backup is abandoned after Options.BackupStall.
func TestStalledBackupDoesNotBlockWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	c, err := api.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := make([]byte, 1<<20-1024)
	enq := func(i int) error {
		for k := range body {
			body[k] = byte('a' + (i+k)%26)
		}
		_, err := c.Enqueue(context.Background(), api.Request{Method: "POST", URL: "http://127.0.0.1:1/x", Body: body}, api.EnqueueOptions{Key: fmt.Sprintf("k-%d", i)})
		return err
	}
	for i := 0; i < 12; i++ {
		if err := enq(i); err != nil {
			t.Fatal(err)
		}
	}
	fi, _ := os.Stat(path)
	t.Logf("database: %d bytes", fi.Size())

	srv := httptest.NewServer(admin.Handler(c, admin.Options{BackupStall: time.Second}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/backup HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 1024)
	if _, err := conn.Read(buf); err != nil { // the backup has started
		t.Fatal(err)
	}
	// ... and the client now stops reading.

	done := make(chan error, 1)
	go func() {
		for i := 12; i < 40; i++ {
			if err := enq(i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		fi, _ := os.Stat(path)
		t.Errorf("enqueues hung for 10s while a backup client stopped reading (file %d bytes)", fi.Size())
		conn.Close()
		<-done
	}
}

// adminCase is one request to the admin API and the answer it must get.
type adminCase struct {
	name   string
	method string
	path   string
	body   func() io.Reader
	status []int    // any of these
	codes  []string // any of these, for status >= 300
	check  func(t *testing.T, body []byte)
}

func text(s string) func() io.Reader { return func() io.Reader { return strings.NewReader(s) } }

// Every hostile request to the admin API gets a 4xx with a stable code,
// never a 5xx, and nothing in the database changes.
func TestAdminHostileInputs(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{AllowHosts: []string{"127.0.0.1"}})
	na := apitest.NeedsAttention(t, c, "admin-na")
	apitest.EnqueueOK(t, c, apitest.HostileURL, "admin-pending")
	srv := httptest.NewServer(admin.Handler(c, admin.Options{}))
	t.Cleanup(srv.Close)

	job := func(extra string) string { return `{"url":"` + apitest.HostileURL + `"` + extra + `}` }
	bigBody := base64.StdEncoding.EncodeToString(make([]byte, api.MaxBodyLen+1))
	var hdrs []string
	for i := range api.MaxHeaders + 1 {
		hdrs = append(hdrs, fmt.Sprintf(`{"name":"X-H-%d","value":"v"}`, i))
	}
	over4MiB := func() string { return job(`,"key":"` + strings.Repeat("a", adminwire.MaxBody) + `"`) }
	resolve := "/v1/jobs/" + na.ID + "/resolve"
	bad := []int{http.StatusBadRequest}
	inv := []string{adminwire.CodeInvalid}
	tests := []adminCase{
		{"body over 4 MiB", "POST", "/v1/jobs", text(over4MiB()), []int{400, 413}, []string{adminwire.CodeInvalid, adminwire.CodeTooLarge}, nil},
		{"chunked body over 4 MiB", "POST", "/v1/jobs", func() io.Reader { return io.MultiReader(strings.NewReader(over4MiB())) }, []int{400, 413}, []string{adminwire.CodeInvalid, adminwire.CodeTooLarge}, nil},
		{"unknown JSON field", "POST", "/v1/jobs", text(job(`,"colour":"red"`)), bad, inv, nil},
		{"url of the wrong type", "POST", "/v1/jobs", text(`{"url":5}`), bad, inv, nil},
		{"max_attempts as a string", "POST", "/v1/jobs", text(job(`,"max_attempts":"5"`)), bad, inv, nil},
		{"body that is not base64", "POST", "/v1/jobs", text(job(`,"body":"not base64!"`)), bad, inv, nil},
		// An object of headers is the one enqueue schema's other form
		// (the --from lines' one); its values must be strings.
		{"headers as a string", "POST", "/v1/jobs", text(job(`,"headers":"a: b"`)), bad, inv, nil},
		{"headers as an object of numbers", "POST", "/v1/jobs", text(job(`,"headers":{"a":1}`)), bad, inv, nil},
		{"header with an unknown field", "POST", "/v1/jobs", text(job(`,"headers":[{"name":"a","value":"b","x":1}]`)), bad, inv, nil},
		{"data and body both", "POST", "/v1/jobs", text(job(`,"data":"a","body":"YQ=="`)), bad, inv, nil},
		{"deadline as a number", "POST", "/v1/jobs", text(job(`,"deadline":5`)), bad, inv, nil},
		{"trailing second object", "POST", "/v1/jobs", text(job(`,"key":"t1"`) + job("")), bad, inv, nil},
		{"trailing closing brace", "POST", "/v1/jobs", text(job(`,"key":"t2"`) + "}"), bad, inv, nil},
		{"trailing closing bracket", "POST", "/v1/jobs", text(job(`,"key":"t3"`) + "]"), bad, inv, nil},
		{"empty body", "POST", "/v1/jobs", text(""), bad, inv, nil},
		{"JSON null", "POST", "/v1/jobs", text("null"), bad, inv, nil},
		{"JSON array", "POST", "/v1/jobs", text("[]"), bad, inv, nil},
		{"nesting 20000 deep", "POST", "/v1/jobs", text(job(`,"headers":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000))), bad, inv, nil},
		{"number overflow", "POST", "/v1/jobs", text(job(`,"max_attempts":1e400`)), bad, inv, nil},
		{"unknown key_format", "POST", "/v1/jobs", text(job(`,"key_format":"bogus"`)), bad, inv, nil},
		{"job body over 1 MiB", "POST", "/v1/jobs", text(job(`,"body":"` + bigBody + `"`)), bad, inv, nil},
		{"101 headers", "POST", "/v1/jobs", text(job(`,"headers":[` + strings.Join(hdrs, ",") + `]`)), bad, inv, nil},
		{"NUL in a header value", "POST", "/v1/jobs", text(job(`,"headers":[{"name":"X-A","value":"a\u0000b"}]`)), bad, inv, nil},
		{"key of 256 characters", "POST", "/v1/jobs", text(job(`,"key":"` + strings.Repeat("k", 256) + `"`)), bad, inv, nil},
		{"metadata address with an allowlist", "POST", "/v1/jobs", text(`{"url":"http://169.254.169.254/latest/meta-data"}`), bad, inv, nil},
		{"host off the allowlist", "POST", "/v1/jobs", text(`{"url":"http://example.com/pay"}`), bad, inv, nil},
		{"list: unknown state", "GET", "/v1/jobs?state=bogus", nil, bad, inv, nil},
		{"list: a bad state in a comma list", "GET", "/v1/jobs?state=pending,bogus", nil, bad, inv, nil},
		{"list: limit 0", "GET", "/v1/jobs?limit=0", nil, bad, inv, nil},
		{"list: limit 100001", "GET", "/v1/jobs?limit=100001", nil, bad, inv, nil},
		{"list: limit 10001", "GET", "/v1/jobs?limit=10001", nil, bad, inv, nil},
		{"list: limit not a number", "GET", "/v1/jobs?limit=ten", nil, bad, inv, nil},
		{"list: cursor not hex", "GET", "/v1/jobs?cursor=zz", nil, bad, inv, nil},
		{"list: cursor of the wrong length", "GET", "/v1/jobs?cursor=abcd", nil, bad, inv, nil},
		{"resolve without a note", "POST", resolve, text(`{"as":"succeeded"}`), bad, inv, nil},
		{"resolve as pending", "POST", resolve, text(`{"as":"pending","note":"checked"}`), bad, inv, nil},
		{"resolve note over 4096 bytes", "POST", resolve, text(`{"as":"failed","note":"` + strings.Repeat("n", api.MaxNoteLen+1) + `"}`), bad, inv, nil},
		{"resolve with an unknown field", "POST", resolve, text(`{"as":"failed","note":"checked","force":true}`), bad, inv, nil},
		{"resolve with trailing data", "POST", resolve, text(`{"as":"failed","note":"checked"} x`), bad, inv, nil},
		{"resolve with no body", "POST", resolve, nil, bad, inv, nil},
		{"cancel an unknown job", "POST", "/v1/jobs/no-such-job/cancel", nil, []int{404}, []string{adminwire.CodeNotFound}, nil},
		{"cancel a needs_attention job", "POST", "/v1/jobs/" + na.ID + "/cancel", nil, []int{409}, []string{adminwire.CodeIllegalTransition}, nil},
		{"get a NUL id", "GET", "/v1/jobs/%00", nil, []int{400, 404}, []string{adminwire.CodeNotFound, adminwire.CodeInvalid}, nil},
		{"batch body that is not JSON", "POST", "/v1/jobs/batch", text("jobs"), bad, inv, nil},
		{"batch with only invalid jobs", "POST", "/v1/jobs/batch", text(`{"jobs":[` + job(`,"key":"b1","key_format":"bogus"`) + `,{"url":"ftp://x/","key":"b2"}]}`), []int{200}, nil,
			func(t *testing.T, body []byte) {
				var out struct {
					Results []struct {
						Job   *api.Job `json:"job"`
						Error *struct {
							Code string `json:"code"`
						} `json:"error"`
					} `json:"results"`
				}
				if err := json.Unmarshal(body, &out); err != nil || len(out.Results) != 2 {
					t.Fatalf("batch answer: %v %s", err, apitest.Clip(body))
				}
				for i, r := range out.Results {
					if r.Error == nil || r.Error.Code != adminwire.CodeInvalid || r.Job != nil {
						t.Errorf("batch result %d: got %s, want only an invalid_input error", i, apitest.Clip(body))
					}
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := apitest.Snapshot(t, c)
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			rq, err := http.NewRequest(tc.method, srv.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(rq)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Errorf("got %d %s, want never a 5xx for bad input", resp.StatusCode, apitest.Clip(b))
			}
			if !containsInt(tc.status, resp.StatusCode) {
				t.Errorf("got status %d %s, want one of %v", resp.StatusCode, apitest.Clip(b), tc.status)
			}
			if resp.StatusCode >= 300 {
				var we adminwire.Error
				if err := json.Unmarshal(b, &we); err != nil {
					t.Errorf("error body is not JSON (%v): %s", err, apitest.Clip(b))
				} else if !containsStr(tc.codes, we.Error.Code) || we.Error.Message == "" {
					t.Errorf("got code %q message %q, want one of %v with a message", we.Error.Code, we.Error.Message, tc.codes)
				}
			}
			if tc.check != nil {
				tc.check(t, b)
			}
			if after := apitest.Snapshot(t, c); after != before {
				t.Errorf("the database changed:\n got %s\nwant %s", apitest.Clip(after), apitest.Clip(before))
			}
		})
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// adminPost posts b to /v1/jobs of the admin API at base.
func adminPost(t *testing.T, client *http.Client, base string, b []byte) (int, adminwire.Error, []byte) {
	t.Helper()
	resp, err := client.Post(base+"/v1/jobs", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST /v1/jobs: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	var we adminwire.Error
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(body, &we); err != nil {
			t.Fatalf("error answer %d is not a JSON error body (%v): %s", resp.StatusCode, err, apitest.Clip(body))
		}
	}
	return resp.StatusCode, we, body
}

func totalJobs(t *testing.T, c *api.Client) int64 {
	t.Helper()
	st, err := c.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	var n int64
	for _, v := range st {
		n += v
	}
	return n
}

// FuzzAdminEnqueue posts arbitrary bytes to the admin API's /v1/jobs over a
// real database: bad input is always 400 invalid_input (never a 5xx), a
// body that is not valid JSON never creates a job, and a job is either
// wholly stored (201, readable, valid, the file consistent) or not at all.
func FuzzAdminEnqueue(f *testing.F) {
	for _, s := range apitest.EnqueueSeeds {
		f.Add([]byte(s))
	}
	c, err := api.Open(filepath.Join(f.TempDir(), "fuzz.db"), &api.Options{Warn: io.Discard})
	if err != nil {
		f.Fatalf("api.Open: %v", err)
	}
	srv := httptest.NewServer(admin.Handler(c, admin.Options{}))
	f.Cleanup(func() {
		srv.Close()
		c.Close()
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		before := totalJobs(t, c)
		status, we, body := adminPost(t, srv.Client(), srv.URL, b)
		after := totalJobs(t, c)
		_, decErr := api.DecodeEnqueue(b)
		switch status {
		case http.StatusCreated:
			if !json.Valid(b) {
				t.Fatalf("body %s is not valid JSON, yet a job was created: %s", apitest.Clip(b), apitest.Clip(body))
			}
			if decErr != nil {
				t.Fatalf("DecodeEnqueue refuses %s (%v), yet the handler created a job", apitest.Clip(b), decErr)
			}
			var res struct {
				Job *api.Job `json:"job"`
			}
			if err := json.Unmarshal(body, &res); err != nil || res.Job == nil {
				t.Fatalf("201 answer without a job (%v): %s", err, apitest.Clip(body))
			}
			if after != before+1 {
				t.Fatalf("201 for %s: jobs went from %d to %d, want one more", apitest.Clip(b), before, after)
			}
			j, err := c.Store().Get(res.Job.ID)
			if err != nil {
				t.Fatalf("created job %s is not readable: %v", res.Job.ID, err)
			}
			o := api.EnqueueOptions{Key: j.Key, StatusURL: j.StatusURL, KeyTTL: j.KeyTTL, MaxAttempts: j.MaxAttempts,
				Deadline: j.DeadlineAfter, AttemptTimeout: j.AttemptTimeout, NoEffectStatuses: j.NoEffectStatuses}
			if j.KeyFormat != "" {
				if o.KeyFormat, err = idemkey.ParseFormat(j.KeyFormat); err != nil {
					t.Fatalf("stored key format %q: %v", j.KeyFormat, err)
				}
			}
			req := api.Request{Method: j.Request.Method, URL: j.Request.URL, Header: j.Request.Header, Body: j.Request.Body}
			if _, err := api.Validate(req, o, nil); err != nil {
				t.Fatalf("stored job %s does not pass validation again: %v", j.ID, err)
			}
			rep, err := c.Check(context.Background())
			if err != nil || !rep.OK() {
				t.Fatalf("file inconsistent after creating job %s: %v %v", j.ID, err, rep.Problems)
			}
		case http.StatusOK, http.StatusConflict:
			if status == http.StatusConflict && we.Error.Code != adminwire.CodeKeyConflict {
				t.Fatalf("409 for %s with code %q, want %q", apitest.Clip(b), we.Error.Code, adminwire.CodeKeyConflict)
			}
			if after != before {
				t.Fatalf("answer %d for %s changed the job count from %d to %d", status, apitest.Clip(b), before, after)
			}
		case http.StatusBadRequest:
			if we.Error.Code != adminwire.CodeInvalid {
				t.Fatalf("400 for %s with code %q, want %q", apitest.Clip(b), we.Error.Code, adminwire.CodeInvalid)
			}
			if we.Error.Message == "" {
				t.Fatalf("400 for %s without a message", apitest.Clip(b))
			}
			if after != before {
				t.Fatalf("refused body %s changed the job count from %d to %d", apitest.Clip(b), before, after)
			}
		default:
			t.Fatalf("POST /v1/jobs %s: got %d %s, want 201, 200, 400 or 409", apitest.Clip(b), status, apitest.Clip(body))
		}
		if decErr != nil && status != http.StatusBadRequest {
			t.Fatalf("DecodeEnqueue refuses %s (%v) but the handler answered %d", apitest.Clip(b), decErr, status)
		}
	})
}

// POST /v1/jobs takes the one enqueue schema, as a --from line gives it:
// headers as an object, header_lines, data as text, run_at as a duration.
func TestAdminEnqueueTakesTheOneSchema(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{})
	srv := httptest.NewServer(admin.Handler(c, admin.Options{}))
	t.Cleanup(srv.Close)
	body := `{"url":"` + apitest.HostileURL + `","headers":{"Content-Type":"application/json"},"header_lines":["X-A: 1"],"data":"{}","run_at":"10m","key":"one-schema"}`
	resp, err := srv.Client().Post(srv.URL+"/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: got %d %s, want 201", body, resp.StatusCode, apitest.Clip(b))
	}
	j, err := c.Get(context.Background(), "one-schema")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(j.Headers) != "[{Content-Type application/json} {X-A 1}]" || j.BodySize != 2 || time.Until(j.NextRunAt) < 9*time.Minute {
		t.Errorf("stored job: headers %v, body %d bytes, next run %s; want both headers, the 2-byte body, in 10 minutes", j.Headers, j.BodySize, j.NextRunAt)
	}
}

// The admin API's earlier body stays accepted as it was: a field given as
// null, or with an empty or zero value, means its default (clients that
// serialise every field send them). Only --from lines refuse those.
func TestAdminEnqueueTakesNullAndZeroAsDefaults(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{})
	srv := httptest.NewServer(admin.Handler(c, admin.Options{}))
	t.Cleanup(srv.Close)
	body := `{"url":"` + apitest.HostileURL + `","method":"","key":"","key_format":"","status_url":"","key_ttl":"0s","max_attempts":0,` +
		`"deadline":null,"attempt_timeout":null,"run_at":null,"data":"x"}`
	resp, err := srv.Client().Post(srv.URL+"/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: got %d %s, want 201", body, resp.StatusCode, apitest.Clip(b))
	}
	var out struct {
		Job api.Job `json:"job"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	j := out.Job
	if left := time.Until(j.Deadline); j.Method != "POST" || j.Key == "" || j.MaxAttempts != api.DefaultMaxAttempts || left < api.DefaultDeadline-time.Minute || left > api.DefaultDeadline {
		t.Errorf("stored job: method %q, key %q, max attempts %d, deadline in %s; want the defaults", j.Method, j.Key, j.MaxAttempts, left)
	}
	if _, err := api.DecodeEnqueue([]byte(body)); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("DecodeEnqueue (the --from rule) of the same body: %v; want a refusal", err)
	}
}

// The admin API's job views hide the headers and parameters the name
// rules cover (Authentication, X-JWT, X-Passphrase, a token after a ';'),
// which were shown in clear before (found by a probe).
func TestAdminJobViewHidesCredentialNames(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{})
	srv := httptest.NewServer(admin.Handler(c, admin.Options{}))
	t.Cleanup(srv.Close)
	body := `{"url":"` + apitest.HostileURL + `?a=1;token=PLANTED1","key":"names","header_lines":["Authentication: PLANTED2","X-JWT: PLANTED3","X-Passphrase: PLANTED4"]}`
	code, _, b := adminPost(t, srv.Client(), srv.URL, []byte(body))
	if code != http.StatusCreated {
		t.Fatalf("POST: got %d %s", code, apitest.Clip(b))
	}
	for _, path := range []string{"/v1/jobs/names", "/v1/jobs"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range []string{"PLANTED1", "PLANTED2", "PLANTED3", "PLANTED4"} {
			if bytes.Contains(got, []byte(s)) || bytes.Contains(b, []byte(s)) {
				t.Errorf("GET %s (or the enqueue's answer) shows %s: %s", path, s, apitest.Clip(got))
			}
		}
	}
}
