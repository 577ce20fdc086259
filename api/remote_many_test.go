package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemrun/idemrun/api"
)

// EnqueueMany through a runner's admin socket answers per item, as the
// in-process Client does: an invalid job is refused alone and the valid
// ones around it are stored.
func TestRemoteEnqueueManyPerItem(t *testing.T) {
	ctx := context.Background()
	c, rem := socketPair(t)

	batch := func(prefix string) []api.ManyItem {
		return []api.ManyItem{
			{Request: api.Request{Method: "POST", URL: "http://127.0.0.1:9/pay", Body: []byte("1")}, Options: api.EnqueueOptions{Key: prefix + "-a"}},
			{Request: api.Request{Method: "POST", URL: "ftp://127.0.0.1/x"}, Options: api.EnqueueOptions{Key: prefix + "-b"}},
			{Request: api.Request{Method: "POST", URL: "http://127.0.0.1:9/pay", Body: []byte("3")}, Options: api.EnqueueOptions{Key: prefix + "-c"}},
		}
	}
	for _, s := range []struct {
		name string
		svc  *api.Client
	}{{"client", c}, {"remote", rem}} {
		res, err := s.svc.EnqueueMany(ctx, batch(s.name))
		if err != nil {
			t.Errorf("%s: EnqueueMany = %v; want per-item results", s.name, err)
			continue
		}
		if len(res) != 3 || res[0].Err != nil || res[2].Err != nil || !errors.Is(res[1].Err, api.ErrInvalid) {
			t.Errorf("%s: results %+v; want item 1 refused as invalid, items 0 and 2 stored", s.name, res)
			continue
		}
		for _, k := range []string{"-a", "-c"} {
			if _, err := c.GetByKey(ctx, s.name+k); err != nil {
				t.Errorf("%s: job %s%s not stored: %v", s.name, s.name, k, err)
			}
		}
		if _, err := c.GetByKey(ctx, s.name+"-b"); err == nil {
			t.Errorf("%s: the invalid job was stored", s.name)
		}
	}
	// Only invalid items: no request to the runner, every item refused.
	res, err := rem.EnqueueMany(ctx, batch("only")[1:2])
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, api.ErrInvalid) {
		t.Errorf("remote, one invalid item: %+v, %v", res, err)
	}
}
