package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// chartScan bounds the finished jobs of each end state read for the
// chart: beyond it the chart shows the latest ones and says so.
const chartScan = 5000

// chartTTL is how long a chart is reused: every live page asks for it.
const chartTTL = 10 * time.Second

// Chart geometry: one bar a minute for the last hour.
const (
	chartMinutes = 60
	chartWidth   = 600
	chartHeight  = 120
	barStep      = chartWidth / chartMinutes
)

// chart is the jobs finished per minute over the last hour.
type chart struct {
	Bars    []bar
	Max     int
	Total   int
	Partial bool // a state had more than chartScan finishes in the hour
	From    time.Time
	To      time.Time
}

// bar is one minute of the chart, laid out in the SVG's coordinates.
type bar struct {
	X, Y, W, H int
	N          int
	Label      string
}

// chartCache keeps the last chart for chartTTL.
type chartCache struct {
	mu  sync.Mutex
	at  time.Time
	val chart
}

func (cc *chartCache) get(ctx context.Context, c *api.Client, now time.Time) (chart, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.at.IsZero() && now.Sub(cc.at) < chartTTL && now.Sub(cc.at) >= 0 {
		return cc.val, nil
	}
	v, err := buildChart(ctx, c, now)
	if err != nil {
		return chart{}, err
	}
	cc.at, cc.val = now, v
	return v, nil
}

// buildChart counts the jobs that reached an end state in each of the
// last 60 minutes, by their last update, reading each end state's list
// newest first until it is past the hour (at most chartScan jobs each).
func buildChart(ctx context.Context, c *api.Client, now time.Time) (chart, error) {
	end := now.Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-chartMinutes * time.Minute)
	counts := make([]int, chartMinutes)
	ch := chart{From: start, To: end}
	for _, st := range []store.State{store.StateSucceeded, store.StateFailed, store.StateCanceled} {
		cursor, seen := "", 0
	pages:
		for seen < chartScan {
			p, err := c.List(ctx, api.ListFilter{States: []store.State{st}, Since: start, Limit: min(1000, chartScan-seen), Cursor: cursor})
			if err != nil {
				return chart{}, err
			}
			for _, j := range p.Jobs {
				if j.UpdatedAt.Before(start) {
					break pages
				}
				if i := int(j.UpdatedAt.Sub(start) / time.Minute); i >= 0 && i < chartMinutes {
					counts[i]++
				}
			}
			seen += len(p.Jobs)
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if seen >= chartScan && cursor != "" {
			ch.Partial = true
		}
	}
	for _, n := range counts {
		ch.Max = max(ch.Max, n)
		ch.Total += n
	}
	for i, n := range counts {
		h := 0
		if ch.Max > 0 {
			h = n * (chartHeight - 4) / ch.Max
		}
		if n > 0 && h == 0 {
			h = 1
		}
		at := start.Add(time.Duration(i) * time.Minute)
		ch.Bars = append(ch.Bars, bar{X: i * barStep, Y: chartHeight - h, W: barStep - 2, H: h, N: n,
			Label: fmt.Sprintf("%s–%s UTC: %d finished", at.UTC().Format("15:04"), at.Add(time.Minute).UTC().Format("15:04"), n)})
	}
	return ch, nil
}
