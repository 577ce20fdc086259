package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/runner"
)

// hostRow is one host on the hosts page and the overview: its policy
// and waiting jobs (from the store), and what the runner serving the
// dashboard knows of it (Figures, nil without one).
type hostRow struct {
	api.HostStatus
	Figures *runner.HostFigures
	// Health sums the row up: "paused", "breaker open", "throttled",
	// "ok", or "" when no runner's figures are at hand.
	Health string
}

// hostsData is the hosts page.
type hostsData struct {
	Rows    []hostRow
	Figures bool // a runner's figures are shown
}

// hostRows joins the store's hosts with the runner's figures, hosts in
// trouble first.
func (s *server) hostRows(r *http.Request) ([]hostRow, error) {
	hs, err := s.c.Hosts(r.Context())
	if err != nil {
		return nil, err
	}
	figs := map[string]runner.HostFigures{}
	if s.o.HostFigures != nil {
		for _, f := range s.o.HostFigures() {
			figs[f.Host] = f
		}
	}
	rows := make([]hostRow, 0, len(hs)+len(figs))
	seen := map[string]bool{}
	for _, h := range hs {
		row := hostRow{HostStatus: h}
		if f, ok := figs[h.Host]; ok {
			row.Figures = &f
		}
		seen[h.Host] = true
		rows = append(rows, row)
	}
	// Hosts the runner sent to lately with nothing waiting and no policy.
	for host, f := range figs {
		if !seen[host] {
			f := f
			rows = append(rows, hostRow{HostStatus: api.HostStatus{Host: host}, Figures: &f})
		}
	}
	for i := range rows {
		rows[i].Health = health(rows[i], s.o.HostFigures != nil)
	}
	rank := func(h string) int {
		switch h {
		case "paused", "breaker open":
			return 0
		case "breaker half-open", "throttled":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(rows, func(a, b hostRow) int {
		if d := rank(a.Health) - rank(b.Health); d != 0 {
			return d
		}
		return strings.Compare(a.Host, b.Host)
	})
	return rows, nil
}

func health(r hostRow, figures bool) string {
	switch {
	case r.Policy != nil && r.Policy.Paused:
		return "paused"
	case r.Figures != nil && r.Figures.Breaker == "open":
		return "breaker open"
	case r.Figures != nil && r.Figures.Breaker == "half_open":
		return "breaker half-open"
	case r.Figures != nil && r.Figures.Throttled:
		return "throttled"
	case figures:
		return "ok"
	}
	return ""
}

func (s *server) hosts(w http.ResponseWriter, r *http.Request) {
	rows, err := s.hostRows(r)
	if err != nil {
		s.fail(w, r, statusOf(err), "reading the hosts failed: "+err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "hosts", page{Title: "Hosts", Nav: "hosts", Refresh: int(s.o.Refresh.Seconds()),
		Data: hostsData{Rows: rows, Figures: s.o.HostFigures != nil}})
}
