package api_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/idemkey"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/bolt"
	"github.com/idemrun/idemrun/store/bolt/bolttest"
)

// EnqueueMany: "Invalid jobs and key conflicts get their own Err" with
// Enqueue's key rules per job.
func TestDocEnqueueManySameKeyInBatch(t *testing.T) {
	c := revOpen(t)
	ctx := context.Background()
	req := func(b string) api.Request { return api.Request{URL: "http://127.0.0.1:1/x", Body: []byte(b)} }
	res, err := c.EnqueueMany(ctx, []api.ManyItem{
		{Request: req("a"), Options: api.EnqueueOptions{Key: "k-1"}},
		{Request: req("a"), Options: api.EnqueueOptions{Key: "k-1"}},
		{Request: req("b"), Options: api.EnqueueOptions{Key: "k-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || !res[1].Existing || res[1].Job.ID != res[0].Job.ID {
		t.Errorf("same key same request twice in a batch: %+v %+v", res[0], res[1])
	}
	if !errors.Is(res[2].Err, store.ErrKeyConflict) {
		t.Errorf("same key other request in a batch: %+v", res[2])
	}
}

// The errors application code checks come from this package too, as the
// store's own values.
func TestStoreErrorsThroughAPI(t *testing.T) {
	ctx := context.Background()
	c, err := api.Open(filepath.Join(t.TempDir(), "e.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := api.Request{Method: "POST", URL: "http://127.0.0.1:9/p", Body: []byte("a")}
	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	req.Body = []byte("b")
	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "k"}); !errors.Is(err, api.ErrKeyConflict) {
		t.Errorf("same key, other body: %v; want api.ErrKeyConflict", err)
	}
	if _, err := c.Get(ctx, "no-such-key"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown key: %v; want api.ErrNotFound", err)
	}
}

// Every hostile input to the Go API is refused with the error it names,
// and nothing in the database changes.
func TestGoAPIHostileInputs(t *testing.T) {
	t.Parallel()
	c := apitest.OpenClient(t, api.Options{AllowHosts: []string{"127.0.0.1", "*.example.com"}})
	ctx := context.Background()
	na := apitest.NeedsAttention(t, c, "na-1")
	pending := apitest.EnqueueOK(t, c, apitest.HostileURL, "pending-1")
	cancelTarget := apitest.EnqueueOK(t, c, apitest.HostileURL+"/cancel", "cancel-target")

	req := func(mut func(r *api.Request)) api.Request {
		r := api.Request{Method: http.MethodPost, URL: apitest.HostileURL, Header: []api.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"amount":1}`)}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	enq := func(r api.Request, o api.EnqueueOptions) func() error {
		return func() error {
			res, err := c.Enqueue(ctx, r, o)
			if err == nil {
				return fmt.Errorf("enqueued job %s", res.Job.ID)
			}
			return err
		}
	}
	headers := func(n int, size int) []api.Header {
		var hs []api.Header
		for i := range n {
			hs = append(hs, api.Header{Name: fmt.Sprintf("X-H-%d", i), Value: strings.Repeat("v", size)})
		}
		return hs
	}
	list := func(f api.ListFilter) func() error {
		return func() error {
			p, err := c.List(ctx, f)
			if err == nil {
				return fmt.Errorf("listed %d jobs", len(p.Jobs))
			}
			return err
		}
	}
	steer := func(fn func() (*api.Job, error)) func() error {
		return func() error {
			j, err := fn()
			if err == nil {
				return fmt.Errorf("job %s is now %s", j.ID, j.State)
			}
			return err
		}
	}
	longNote := strings.Repeat("n", api.MaxNoteLen+1)

	tests := []struct {
		name  string
		call  func() error
		want  error
		field string // the InvalidError field, when want is api.ErrInvalid
	}{
		{"body over 1 MiB", enq(req(func(r *api.Request) { r.Body = make([]byte, api.MaxBodyLen+1) }), api.EnqueueOptions{}), api.ErrInvalid, "body"},
		{"101 headers", enq(req(func(r *api.Request) { r.Header = headers(api.MaxHeaders+1, 1) }), api.EnqueueOptions{}), api.ErrInvalid, "headers"},
		{"header bytes over 64 KiB", enq(req(func(r *api.Request) { r.Header = headers(2, 33<<10) }), api.EnqueueOptions{}), api.ErrInvalid, "headers"},
		{"URL over 8 KiB", enq(req(func(r *api.Request) { r.URL = apitest.HostileURL + "?q=" + strings.Repeat("a", api.MaxURLLen) }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"URL with user:password", enq(req(func(r *api.Request) { r.URL = "http://u:p@127.0.0.1:9/x" }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"ftp URL", enq(req(func(r *api.Request) { r.URL = "ftp://127.0.0.1/x" }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"URL with CR LF", enq(req(func(r *api.Request) { r.URL = apitest.HostileURL + "\r\nHost: evil" }), api.EnqueueOptions{}), api.ErrInvalid, "url"},
		{"key of 256 characters", enq(req(nil), api.EnqueueOptions{Key: strings.Repeat("k", 256)}), api.ErrInvalid, "key"},
		{"key with a space", enq(req(nil), api.EnqueueOptions{Key: "a b"}), api.ErrInvalid, "key"},
		{"key with a control character", enq(req(nil), api.EnqueueOptions{Key: "a\x01b"}), api.ErrInvalid, "key"},
		{"status-url over 2048 bytes", enq(req(nil), api.EnqueueOptions{StatusURL: apitest.HostileURL + "/{key}?" + strings.Repeat("p", api.MaxTemplateLen)}), api.ErrInvalid, "status-url"},
		{"status-url without a placeholder", enq(req(nil), api.EnqueueOptions{StatusURL: apitest.HostileURL + "/status"}), api.ErrInvalid, "status-url"},
		{"max attempts 101", enq(req(nil), api.EnqueueOptions{MaxAttempts: api.MaxAttemptsLimit + 1}), api.ErrInvalid, "max-attempts"},
		{"max attempts -1", enq(req(nil), api.EnqueueOptions{MaxAttempts: -1}), api.ErrInvalid, "max-attempts"},
		{"deadline 31 days", enq(req(nil), api.EnqueueOptions{Deadline: 31 * 24 * time.Hour}), api.ErrInvalid, "deadline"},
		{"negative deadline", enq(req(nil), api.EnqueueOptions{Deadline: -time.Second}), api.ErrInvalid, "deadline"},
		{"attempt timeout 11m", enq(req(nil), api.EnqueueOptions{AttemptTimeout: 11 * time.Minute}), api.ErrInvalid, "attempt-timeout"},
		{"key TTL 366 days", enq(req(nil), api.EnqueueOptions{KeyTTL: 366 * 24 * time.Hour}), api.ErrInvalid, "key-ttl"},
		{"negative key TTL", enq(req(nil), api.EnqueueOptions{KeyTTL: -time.Minute}), api.ErrInvalid, "key-ttl"},
		{"NUL in a header value", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "X-A", Value: "a\x00b"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header X-A"},
		{"CR LF in a header value", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "X-A", Value: "a\r\nX-B: b"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header X-A"},
		{"unicode in a header name", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "Nämé", Value: "x"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header name"},
		{"Idempotency-Key header", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "idempotency-key", Value: "mine"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header name"},
		{"Transfer-Encoding header", enq(req(func(r *api.Request) { r.Header = []api.Header{{Name: "Transfer-Encoding", Value: "chunked"}} }), api.EnqueueOptions{}), api.ErrInvalid, "header name"},
		{"method with a space", enq(req(func(r *api.Request) { r.Method = "PO ST" }), api.EnqueueOptions{}), api.ErrInvalid, "method"},
		{"method over 32 bytes", enq(req(func(r *api.Request) { r.Method = strings.Repeat("P", 33) }), api.EnqueueOptions{}), api.ErrInvalid, "method"},
		{"no-effect status 200", enq(req(nil), api.EnqueueOptions{NoEffectStatuses: []int{503, 200}}), api.ErrInvalid, "no-effect-status"},
		{"unknown key format", enq(req(nil), api.EnqueueOptions{KeyFormat: idemkey.Format(99)}), api.ErrInvalid, "key-format"},
		{"allowlist refuses another host", enq(req(func(r *api.Request) { r.URL = "http://example.org/pay" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses a look-alike suffix", enq(req(func(r *api.Request) { r.URL = "https://a.example.com.evil.org/pay" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses 169.254.169.254", enq(req(func(r *api.Request) { r.URL = "http://169.254.169.254/latest/meta-data" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses [fe80::1]", enq(req(func(r *api.Request) { r.URL = "http://[fe80::1]/x" }), api.EnqueueOptions{}), api.ErrInvalid, "url host"},
		{"allowlist refuses a status-url host", enq(req(nil), api.EnqueueOptions{StatusURL: "http://example.org/s/{key}"}), api.ErrInvalid, "url host"},
		{"EnqueueMany with every item invalid", func() error {
			res, err := c.EnqueueMany(ctx, []api.ManyItem{
				{Request: req(func(r *api.Request) { r.URL = "ftp://x/" })},
				{Request: req(nil), Options: api.EnqueueOptions{Key: strings.Repeat("k", 256)}},
				{Request: req(func(r *api.Request) { r.Header = headers(api.MaxHeaders+1, 1) })},
			})
			if err != nil {
				return err
			}
			for i, r := range res {
				if !errors.Is(r.Err, api.ErrInvalid) {
					return fmt.Errorf("item %d: got %v, want ErrInvalid", i, r.Err)
				}
			}
			return res[0].Err
		}, api.ErrInvalid, "url"},
		{"List limit 10001", list(api.ListFilter{Limit: store.MaxListLimit + 1}), api.ErrInvalid, "limit"},
		{"List limit -1", list(api.ListFilter{Limit: -1}), api.ErrInvalid, "limit"},
		{"List unknown state", list(api.ListFilter{States: []api.State{"bogus"}}), api.ErrInvalid, "state"},
		{"List cursor not hex", list(api.ListFilter{Cursor: "zz"}), api.ErrInvalid, "cursor"},
		{"List cursor of the wrong length", list(api.ListFilter{Cursor: "abcd"}), api.ErrInvalid, "cursor"},
		{"Resolve as pending", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StatePending, "t", "checked") }), api.ErrInvalid, "as"},
		{"Resolve without a note", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StateSucceeded, "t", "") }), api.ErrInvalid, "note"},
		{"Resolve with a blank note", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StateSucceeded, "t", " \t\n") }), api.ErrInvalid, "note"},
		{"Resolve note over 4096 bytes", steer(func() (*api.Job, error) { return c.Resolve(ctx, na.ID, store.StateSucceeded, "t", longNote) }), api.ErrInvalid, "note"},
		{"Resolve an unknown job", steer(func() (*api.Job, error) { return c.Resolve(ctx, "no-such-job", store.StateFailed, "t", "checked") }), store.ErrNotFound, ""},
		{"Resolve a pending job", steer(func() (*api.Job, error) { return c.Resolve(ctx, pending.ID, store.StateFailed, "t", "checked") }), store.ErrIllegalTransition, ""},
		{"Cancel an unknown job", steer(func() (*api.Job, error) { return c.Cancel(ctx, "../../etc/passwd", "t", "") }), store.ErrNotFound, ""},
		{"Cancel a needs_attention job", steer(func() (*api.Job, error) { return c.Cancel(ctx, na.ID, "t", "") }), store.ErrIllegalTransition, ""},
		{"Retry a pending job", steer(func() (*api.Job, error) { return c.Retry(ctx, pending.Key, "t", "") }), store.ErrIllegalTransition, ""},
		{"Cancel note over 4096 bytes", steer(func() (*api.Job, error) { return c.Cancel(ctx, cancelTarget.ID, "t", longNote) }), api.ErrInvalid, "note"},
	}
	for _, tc := range tests {
		before := apitest.Snapshot(t, c)
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got error %v, want %v", tc.name, err, tc.want)
		} else if tc.want == api.ErrInvalid {
			var ie *api.InvalidError
			if !errors.As(err, &ie) {
				t.Errorf("%s: got %T %v, want an *api.InvalidError", tc.name, err, err)
			} else if ie.Field != tc.field {
				t.Errorf("%s: got field %q (%v), want %q", tc.name, ie.Field, err, tc.field)
			}
		}
		if after := apitest.Snapshot(t, c); after != before {
			t.Errorf("%s: the database changed:\n got %s\nwant %s", tc.name, apitest.Clip(after), apitest.Clip(before))
		}
	}
	// Controls: the same client accepts the limits' edges.
	edge := api.EnqueueOptions{Key: strings.Repeat("k", 255), MaxAttempts: api.MaxAttemptsLimit, Deadline: api.MaxDeadline,
		AttemptTimeout: api.MaxAttemptTimeout, KeyTTL: api.MaxKeyTTL, NoEffectStatuses: []int{503}}
	if _, err := c.Enqueue(ctx, req(func(r *api.Request) { r.Body = make([]byte, api.MaxBodyLen); r.Header = headers(api.MaxHeaders, 10) }), edge); err != nil {
		t.Errorf("enqueue at every limit's edge: %v", err)
	}
	if _, err := c.Enqueue(ctx, req(func(r *api.Request) { r.URL = "https://a.example.com/pay" }), api.EnqueueOptions{}); err != nil {
		t.Errorf("enqueue to an allowlisted subdomain: %v", err)
	}
}

func revOpen(t *testing.T) *api.Client {
	t.Helper()
	c, err := api.Open(filepath.Join(t.TempDir(), "r.db"), &api.Options{Store: &bolt.Options{CommitLinger: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func revEnq(t *testing.T, c *api.Client, runAt time.Time) *api.Job {
	t.Helper()
	r, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:1/x", Body: []byte("b")}, api.EnqueueOptions{RunAt: runAt, Deadline: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return r.Job
}

// docs/admin-api.md: "`next` absent on the last page"; store.ListPage.Next: "empty on the last one".
func TestListNoNextAfterExactlyFullFilteredPage(t *testing.T) {
	c := revOpen(t)
	for range 3 {
		revEnq(t, c, time.Time{})
	}
	ctx := context.Background()
	un, _ := c.List(ctx, api.ListFilter{Limit: 3})
	if un.Next != "" {
		t.Errorf("unfiltered: Next=%q on a page holding every job", un.Next)
	}
	p, err := c.List(ctx, api.ListFilter{States: []api.State{store.StatePending}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if p.Next != "" {
		p2, _ := c.List(ctx, api.ListFilter{States: []api.State{store.StatePending}, Limit: 3, Cursor: p.Next})
		t.Errorf("--state pending --limit 3 with 3 jobs: Next=%q although the following page has %d jobs (unfiltered list: Next empty)", p.Next, len(p2.Jobs))
	}
}

// Paging with jobs being added, changing state and swept concurrently:
// every job unchanged throughout must be seen exactly once.
func TestListConcurrentPaging(t *testing.T) {
	var off atomic.Int64
	c, err := api.Open(filepath.Join(t.TempDir(), "r.db"), &api.Options{Store: &bolt.Options{CommitLinger: -1}, Now: func() time.Time { return time.Now().Add(time.Duration(off.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	far := time.Now().Add(time.Hour)
	stable := map[string]bool{}
	var churn []*api.Job
	for i := range 600 {
		// runAt spread so the pending index has distinct times
		j := revEnq(t, c, far.Add(time.Duration(rand.IntN(1000))*time.Millisecond))
		if i%3 == 0 {
			churn = append(churn, j)
		} else {
			stable[j.ID] = true
		}
	}
	// pre-cancel some stable ones so 'canceled' state has unchanged members too
	stableCanceled := map[string]bool{}
	n := 0
	off.Store(int64(10 * time.Hour)) // stable canceled jobs look updated in the future: Sweep(0) never takes them
	for id := range stable {
		if n == 60 {
			break
		}
		if _, err := c.Cancel(ctx, id, "t", ""); err != nil {
			t.Fatal(err)
		}
		stableCanceled[id] = true
		n++
	}
	off.Store(0)
	var swept atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // churn: add, cancel churn jobs, sweep canceled (only churned ones are old enough? sweep all canceled older than 0 would delete stable canceled too)
		defer wg.Done()
		i := 0
		for !stop.Load() {
			revEnq(t, c, far.Add(time.Duration(rand.IntN(1000))*time.Millisecond))
			revEnq(t, c, time.Time{})
			if i < len(churn) {
				c.Cancel(ctx, churn[i].ID, "t", "")
				i++
			}
			if i%5 == 0 {
				n, _ := c.Sweep(ctx, 0, 0)
				swept.Add(int64(n))
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	type cfg struct {
		states []api.State
		oldest bool
	}
	cfgs := []cfg{{nil, false}, {[]api.State{store.StatePending}, false}, {[]api.State{store.StatePending}, true},
		{[]api.State{store.StateCanceled, store.StatePending}, false}, {[]api.State{store.StatePending, store.StateCanceled}, true}}
	for _, cf := range cfgs {
		for _, limit := range []int{1, 7, 50} {
			seen := map[string]int{}
			cur := ""
			for pages := 0; pages < 5000; pages++ {
				p, err := c.List(ctx, api.ListFilter{States: cf.states, Oldest: cf.oldest, Limit: limit, Cursor: cur})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range p.Jobs {
					seen[j.ID]++
				}
				if p.Next == "" {
					break
				}
				cur = p.Next
			}
			wantPending := len(cf.states) == 0 || cf.states[0] == store.StatePending || len(cf.states) == 2
			wantCanceled := len(cf.states) == 0 || len(cf.states) == 2
			for id := range stable {
				want := (stableCanceled[id] && wantCanceled) || (!stableCanceled[id] && wantPending)
				if want && seen[id] != 1 {
					t.Errorf("%v oldest=%v limit=%d: stable job %s seen %d times", cf.states, cf.oldest, limit, id, seen[id])
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	fmt.Println("swept", swept.Load())
}

// TestEnqueueManyViews: a batch large enough to be made in several chunks
// returns, for each item, the same view Get gives afterwards (secrets
// redacted), the earlier job for a repeated key with the same request, and
// its own refusal for an invalid item or a conflicting key.
func TestEnqueueManyViews(t *testing.T) {
	const n = 700
	ctx := context.Background()
	c := apitest.OpenClient(t, api.Options{})
	item := func(i int, key string) api.ManyItem {
		return api.ManyItem{
			Request: api.Request{
				Method: "POST",
				URL:    apitest.HostileURL + "?token=s3cret-url-" + fmt.Sprint(i),
				Header: []api.Header{{Name: "Authorization", Value: "Bearer s3cret-hdr"}, {Name: "Content-Type", Value: "application/json"}},
				Body:   []byte(fmt.Sprintf(`{"amount":%d}`, i)),
			},
			Options: api.EnqueueOptions{Key: key, StatusURL: "http://127.0.0.1:9/pay/{key}?api_key=s3cret-status"},
		}
	}
	items := make([]api.ManyItem, n)
	for i := range items {
		items[i] = item(i, fmt.Sprintf("many-%d", i))
		if i%50 == 7 {
			items[i].Request.URL = "ftp://127.0.0.1/x"
		}
	}
	items[600] = item(3, "many-3") // the same request as item 3
	items[601] = item(601, "many-4")
	res, err := c.EnqueueMany(ctx, items)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	if len(res) != n {
		t.Fatalf("%d results; want %d", len(res), n)
	}
	for i, r := range res {
		switch {
		case i%50 == 7:
			if !errors.Is(r.Err, api.ErrInvalid) || r.Job != nil {
				t.Errorf("item %d (ftp URL): %+v; want ErrInvalid and no job", i, r)
			}
			continue
		case i == 601:
			if !errors.Is(r.Err, store.ErrKeyConflict) || r.Job != nil {
				t.Errorf("item 601 (key of item 4, another body): err %v, job %v; want a key conflict", r.Err, r.Job)
			}
			continue
		case i == 600:
			if r.Err != nil || !r.Existing || r.Job == nil || r.Job.ID != res[3].Job.ID {
				t.Errorf("item 600 (repeats item 3): %+v; want Existing job of item 3", r)
				continue
			}
		default:
			if r.Err != nil || r.Existing || r.Job == nil || r.Job.Key != items[i].Options.Key {
				t.Fatalf("item %d: %+v; want a new job with key %s", i, r, items[i].Options.Key)
			}
		}
		got, err := c.Get(ctx, r.Job.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", r.Job.ID, err)
		}
		if !reflect.DeepEqual(r.Job, got) {
			t.Errorf("item %d: EnqueueMany's view differs from Get's:\n got  %+v\n want %+v", i, r.Job, got)
		}
		if s := fmt.Sprintf("%+v", *r.Job); strings.Contains(s, "s3cret") {
			t.Errorf("item %d: view shows a secret: %s", i, s)
		}
	}
}

// TestRunAtPastDeadlineRefused: a first run after the job's deadline could
// never be sent; it is refused (and dates far beyond the index's range can
// no longer wrap around to "due now").
func TestRunAtPastDeadlineRefused(t *testing.T) {
	c, err := api.Open(filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte(`{}`)}
	for _, at := range []time.Time{time.Now().Add(time.Hour), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		_, err := c.Enqueue(context.Background(), req, api.EnqueueOptions{Deadline: 15 * time.Minute, RunAt: at})
		if !errors.Is(err, api.ErrInvalid) {
			t.Errorf("RunAt %s with a 15m deadline: err = %v, want ErrInvalid", at, err)
		}
	}
	if st, _ := c.Stats(context.Background()); st["pending"] != 0 {
		t.Errorf("refused enqueues stored %d jobs", st["pending"])
	}
	if _, err := c.Enqueue(context.Background(), req, api.EnqueueOptions{Deadline: time.Hour, RunAt: time.Now().Add(time.Minute)}); err != nil {
		t.Errorf("RunAt inside the deadline: %v", err)
	}
}

// The key format changes the bytes sent (Idempotency-Key: k vs "k"), and
// the store counts it as part of the request that never changes
// (sameRequest), yet a re-enqueue with the other format is "the same job".
func TestReenqueueWithOtherKeyFormatConflicts(t *testing.T) {
	c := apitest.OpenClient(t, api.Options{})
	ctx := context.Background()
	req := api.Request{URL: "https://api.example.com/pay", Body: []byte(`{"amount":1}`)}
	if _, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "fmt-key"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, req, api.EnqueueOptions{Key: "fmt-key", KeyFormat: idemkey.FormatStructured})
	if err == nil {
		t.Fatalf("re-enqueue with key format structured: Existing=%v, want a key conflict (the stored job sends the token form)", res.Existing)
	}
	if !errors.Is(err, store.ErrKeyConflict) {
		t.Fatalf("err %v, want ErrKeyConflict", err)
	}
}

// TestSweepPassesOverDamagedRecords: one damaged end-state record among
// the expired jobs must not end Client.Sweep after its first batch (a batch
// of 999 read as "done"): every other expired job is swept in one call.
func TestSweepPassesOverDamagedRecords(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	path := filepath.Join(t.TempDir(), "s.db")
	c, err := api.Open(path, &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 2500
	_, ids := enqueueCanceled(t, c, n)
	first := ids[0]
	c.Close()
	// Damage the first canceled job's record.
	bolttest.DamageRecord(t, path, first, 18, 0x7f)
	c, err = api.Open(path, &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now = t0.Add(8 * 24 * time.Hour)
	got, err := c.Sweep(ctx, 7*24*time.Hour, 30*24*time.Hour)
	if err != nil || got != n-1 {
		t.Errorf("Sweep with one damaged record among %d expired jobs = %d, %v; want %d", n, got, err, n-1)
	}
}

// TestSweepReleasesAllExpiredKeys: once key retention has passed for
// every swept job, one Client.Sweep (what `idemrun run` calls every minute)
// must release every reservation, not only the first 1000.
func TestSweepReleasesAllExpiredKeys(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	c, err := api.Open(filepath.Join(t.TempDir(), "s.db"), &api.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 1500
	items, _ := enqueueCanceled(t, c, n)
	// Day 8: the jobs go, their keys stay reserved for 30 days.
	now = t0.Add(8 * 24 * time.Hour)
	if got, err := c.Sweep(ctx, 7*24*time.Hour, 30*24*time.Hour); err != nil || got != n {
		t.Fatalf("Sweep on day 8 = %d, %v; want %d", got, err, n)
	}
	// Day 31: every reservation is over.
	now = t0.Add(31 * 24 * time.Hour)
	if _, err := c.Sweep(ctx, 7*24*time.Hour, 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	still := 0
	for i := range items {
		_, err := c.Enqueue(ctx, items[i].Request, items[i].Options)
		if errors.Is(err, store.ErrKeyConflict) {
			still++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if still > 0 {
		t.Errorf("after key retention passed for all %d swept jobs, Sweep left %d keys reserved", n, still)
	}
}

// enqueueCanceled enqueues n jobs (keys key-0000 …) in one EnqueueMany and
// cancels them all, so they are end-state jobs for a sweep, and returns the
// items and the jobs' ids.
func enqueueCanceled(t *testing.T, c *api.Client, n int) ([]api.ManyItem, []string) {
	t.Helper()
	ctx := context.Background()
	items := make([]api.ManyItem, n)
	for i := range items {
		items[i] = api.ManyItem{
			Request: api.Request{URL: "http://127.0.0.1:9/pay", Body: []byte(fmt.Sprintf(`{"n":%d}`, i))},
			Options: api.EnqueueOptions{Key: fmt.Sprintf("key-%04d", i)},
		}
	}
	res, err := c.EnqueueMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if _, err := c.Cancel(ctx, r.Job.ID, "t", ""); err != nil {
			t.Fatal(err)
		}
		ids[i] = r.Job.ID
	}
	return items, ids
}

// With none of its variables set, Actor records the name of the
// process's user, not "unknown"; a variable set wins.
func TestActorFrom(t *testing.T) {
	none := func(string) string { return "" }
	want := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		want = u.Username
	}
	if got := api.ActorFrom(none); got != want {
		t.Errorf("ActorFrom with no variables = %q, want %q", got, want)
	}
	env := map[string]string{"USER": "alice", "LOGNAME": "bob"}
	if got := api.ActorFrom(func(k string) string { return env[k] }); got != "alice" {
		t.Errorf("ActorFrom with USER=alice = %q, want alice", got)
	}
	env["IDEMRUN_ACTOR"] = "deploy-bot"
	if got := api.ActorFrom(func(k string) string { return env[k] }); got != "deploy-bot" {
		t.Errorf("ActorFrom with IDEMRUN_ACTOR set = %q, want deploy-bot", got)
	}
}
