package api_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/apitest"
	"github.com/idemrun/idemrun/store"
)

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

// TestStatusURLTemplateReuse: the client reuses the template it parsed
// last; alternating templates, a bad one among them, each job still gets
// its own template checked and stored.
func TestStatusURLTemplateReuse(t *testing.T) {
	ctx := context.Background()
	c := apitest.OpenClient(t, api.Options{})
	templates := []string{
		"http://127.0.0.1:9/a/{key}",
		"http://127.0.0.1:9/a/{key}",
		"http://127.0.0.1:9/b?op={key}",
		"http://127.0.0.1:9/{nope}",
		"http://127.0.0.1:9/a/{key}",
		"http://127.0.0.1:9/{nope}",
		"http://127.0.0.1:9/b?op={key}",
	}
	for i, tpl := range templates {
		res, err := c.Enqueue(ctx, api.Request{Method: "POST", URL: apitest.HostileURL}, api.EnqueueOptions{Key: fmt.Sprintf("tpl-%d", i), StatusURL: tpl})
		if strings.Contains(tpl, "nope") {
			if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "status-url") {
				t.Errorf("template %d %q: err = %v; want ErrInvalid naming status-url", i, tpl, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("template %d %q: %v", i, tpl, err)
		}
		if res.Job.StatusURL != tpl {
			t.Errorf("template %d: job stores status URL %q; want %q", i, res.Job.StatusURL, tpl)
		}
	}
}
