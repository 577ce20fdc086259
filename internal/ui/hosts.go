package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/store"
)

// hostRow is one host on the hosts page and the overview: its policy,
// waiting jobs and the live runners' recent traffic (api.HostStatus),
// summed up as Health.
type hostRow struct {
	api.HostStatus
	// Health is "paused", "breaker open", "breaker half-open",
	// "throttled", "ok", or "" when no live runner reports the host.
	Health string
}

// hostRows returns the hosts, those in trouble first.
func (s *server) hostRows(r *http.Request) ([]hostRow, error) {
	hs, err := s.c.Hosts(r.Context())
	if err != nil {
		return nil, err
	}
	rows := make([]hostRow, 0, len(hs))
	for _, h := range hs {
		rows = append(rows, hostRow{HostStatus: h, Health: health(h)})
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

func health(h api.HostStatus) string {
	t := h.Traffic
	switch {
	case h.Policy != nil && h.Policy.Paused:
		return "paused"
	case t == nil:
		return ""
	case t.Breaker == store.BreakerOpen:
		return "breaker open"
	case t.Breaker == store.BreakerHalfOpen:
		return "breaker half-open"
	case t.Throttled:
		return "throttled"
	}
	return "ok"
}

func (s *server) hosts(w http.ResponseWriter, r *http.Request) {
	rows, err := s.hostRows(r)
	if err != nil {
		s.fail(w, r, statusOf(err), "reading the hosts failed: "+err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "hosts", page{Title: "Hosts", Nav: "hosts", Refresh: int(s.o.Refresh.Seconds()), Data: rows})
}
