package admin

import (
	"net/http"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/adminwire"
)

// The routes of host policies: GET /v1/hosts lists every host with a
// policy, waiting jobs or recent traffic (api.HostStatus, the runner's
// figures included); PUT /v1/hosts/{host} changes the limits its
// body gives (adminwire.HostSet); DELETE /v1/hosts/{host} deletes the
// policy (204); POST /v1/hosts/{host}/pause and /resume take an
// optional {"actor", "note"}. Each answers the policy as stored.

func (a *server) hosts(w http.ResponseWriter, r *http.Request) {
	hs, err := a.c.Hosts(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	if hs == nil {
		hs = []api.HostStatus{}
	}
	writeJSON(w, http.StatusOK, adminwire.Hosts[api.HostStatus]{Hosts: hs})
}

func (a *server) setHost(w http.ResponseWriter, r *http.Request) {
	var in adminwire.HostSet
	if err := decode(w, r, 64<<10, &in); err != nil {
		fail(w, err)
		return
	}
	s := api.HostSettings{Rate: in.Rate, Burst: in.Burst, Concurrency: in.Concurrency}
	if in.Settle != nil {
		d, err := time.ParseDuration(*in.Settle)
		if err != nil {
			fail(w, api.Invalid("settle", *in.Settle, api.SettleAccepted))
			return
		}
		s.Settle = &d
	}
	p, err := a.c.SetHost(r.Context(), r.PathValue("host"), s, in.Actor)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (a *server) unsetHost(w http.ResponseWriter, r *http.Request) {
	if err := a.c.UnsetHost(r.Context(), r.PathValue("host")); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *server) hostAction(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in adminwire.Steer
		if r.ContentLength != 0 {
			if err := decode(w, r, 64<<10, &in); err != nil {
				fail(w, err)
				return
			}
		}
		host := r.PathValue("host")
		var p api.HostPolicy
		var err error
		if op == "pause" {
			p, err = a.c.PauseHost(r.Context(), host, in.Actor, in.Note)
		} else {
			p, err = a.c.ResumeHost(r.Context(), host, in.Actor)
		}
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	}
}
