package ui

import (
	"net/http"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// stateCount is one state's count on the overview.
type stateCount struct {
	State store.State
	N     int64
}

// overviewData is the overview page.
type overviewData struct {
	Counts    []stateCount
	Attention int64
	Total     int64
	Chart     chart
	OldestDue *api.Job
	Hosts     []hostRow
	HostsErr  string
}

func (s *server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := s.c.Stats(ctx)
	if err != nil {
		s.fail(w, r, statusOf(err), "reading the counts failed: "+err.Error())
		return
	}
	d := overviewData{}
	for _, state := range store.States() {
		n := st[string(state)]
		d.Counts = append(d.Counts, stateCount{State: state, N: n})
		d.Total += n
	}
	d.Attention = st[string(store.StateNeedsAttention)]
	if d.Chart, err = s.chart.get(ctx, s.c, s.o.Now()); err != nil {
		s.fail(w, r, statusOf(err), "reading the finished jobs failed: "+err.Error())
		return
	}
	// The oldest due job is the earliest next run among pending and
	// unknown jobs, when it has come.
	now := s.o.Now()
	for _, state := range []store.State{store.StatePending, store.StateUnknown} {
		p, err := s.c.List(ctx, api.ListFilter{States: []store.State{state}, Limit: 1, Oldest: true})
		if err != nil {
			s.fail(w, r, statusOf(err), "reading the oldest due job failed: "+err.Error())
			return
		}
		if len(p.Jobs) == 1 && !p.Jobs[0].NextRunAt.After(now) && (d.OldestDue == nil || p.Jobs[0].NextRunAt.Before(d.OldestDue.NextRunAt)) {
			d.OldestDue = p.Jobs[0]
		}
	}
	rows, err := s.hostRows(r)
	if err != nil {
		d.HostsErr = err.Error()
	}
	if len(rows) > 10 {
		rows = rows[:10]
	}
	d.Hosts = rows
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Refresh: int(s.o.Refresh.Seconds()), Data: d})
}
