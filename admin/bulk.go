package admin

import (
	"net/http"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/adminwire"
)

// bulk serves POST /v1/bulk: a bulk action over a filter (api.Client.Bulk).
func (a *server) bulk(w http.ResponseWriter, r *http.Request) {
	var in adminwire.Bulk
	if err := decode(w, r, 64<<10, &in); err != nil {
		fail(w, err)
		return
	}
	req, err := api.BulkFromWire(in)
	if err != nil {
		fail(w, err)
		return
	}
	res, err := a.c.Bulk(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
